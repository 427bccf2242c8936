// Java consumers in groups: two members sharing a topic's partitions, once per assignor of the
// classic protocol, then one member asking for KIP-848's protocol (group.protocol=consumer):
//
//     java -cp '.cache/java/kafka-clients-<version>/*' tests/java/Group.java BOOTSTRAP PREFIX
//
// For "range" (eager) and "cooperative-sticky" (incremental) in turn, topic and group
// PREFIX-<name> (the topic empty, 4 partitions): member a subscribes and polls until it owns
// every partition; member b subscribes, and both poll until they own the partitions between
// them, each some. Then 8 records go to each partition; the members poll until all 32 are
// consumed between them, each commits (commitSync), and then both leave. Each member's
// rebalance listener calls are recorded in order, with "shared" marking when the partitions
// were shared: the eager protocol revokes everything a member owns before each rebalance, the
// cooperative one only what moves.
// Then "group.protocol=consumer": one member of group PREFIX-kip848 subscribes to PREFIX-range
// and polls until poll throws (or 15 s pass): the exception's class and message are printed.
// Prints one JSON object. Compiles against kafka-clients 3.9 and 4.x. The source launcher
// compiles one file, so this program carries its own small JSON writer (as each program here does).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Group {
    static final int PARTITIONS = 4, PER_PARTITION = 8;
    static final long GIVE_UP_MS = 30_000;  // only against a hang: the test then sees what was reached

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        Map<String, Object> out = obj("client_version", AppInfoParser.getVersion());
        out.put("range", shareTopic(bootstrap, prefix + "-range", "org.apache.kafka.clients.consumer.RangeAssignor"));
        out.put("cooperative-sticky", shareTopic(bootstrap, prefix + "-cooperative-sticky",
                                                 "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"));
        out.put("group.protocol=consumer", consumerProtocol(bootstrap, prefix + "-range", prefix + "-kip848"));
        System.out.println(json(out));
    }

    /** One member's thread and rebalance listener. */
    static class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final Properties props;
        final String topic;
        final List<Object> events;  // shared by the members of one group, in call order
        final Set<Integer> owned = new TreeSet<>();  // guarded by this
        final List<Object> records = Collections.synchronizedList(new ArrayList<>());
        final AtomicBoolean stop = new AtomicBoolean(), committed = new AtomicBoolean(), leave = new AtomicBoolean();
        volatile String failure;
        final Thread thread = new Thread(this);

        Member(String name, Properties props, String topic, List<Object> events) {
            this.name = name;
            this.props = props;
            this.topic = topic;
            this.events = events;
        }

        // Polls until stop is set, commits what it consumed, then leaves once leave is set: every
        // member commits before any leaves, since a departure rebalances the others (and a
        // member between revocation and assignment has nothing to commit).
        public void run() {
            try (KafkaConsumer<String, String> c =
                     new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
                c.subscribe(List.of(topic), this);
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100)))
                        records.add(List.of(r.partition(), r.offset(), r.value()));
                }
                c.commitSync();
                committed.set(true);
                while (!leave.get()) Thread.sleep(10);
            } catch (Exception e) {
                failure = e.toString();
                committed.set(true);
            }
        }

        void note(String kind, Collection<TopicPartition> partitions) {
            List<Integer> ps = new ArrayList<>(new TreeSet<>(partitions.stream().map(TopicPartition::partition).toList()));
            events.add(obj("member", name, "call", kind, "partitions", ps));
        }

        synchronized List<Integer> owned() {
            return new ArrayList<>(owned);
        }

        public synchronized void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            note("revoked", partitions);
            partitions.forEach(tp -> owned.remove(tp.partition()));
        }

        public synchronized void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            note("assigned", partitions);
            partitions.forEach(tp -> owned.add(tp.partition()));
        }

        public synchronized void onPartitionsLost(Collection<TopicPartition> partitions) {
            note("lost", partitions);
            partitions.forEach(tp -> owned.remove(tp.partition()));
        }
    }

    static Properties classic(String bootstrap, String group, String clientId, String assignor) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("partition.assignment.strategy", assignor);
        p.put("heartbeat.interval.ms", "200");  // a member learns of a rebalance within this
        p.put("session.timeout.ms", "10000");
        return p;
    }

    // Topic and group are both named ``name``.
    static Map<String, Object> shareTopic(String bootstrap, String name, String assignor) throws Exception {
        String topic = name, group = name;
        List<Object> events = Collections.synchronizedList(new ArrayList<>());
        Member a = new Member("a", classic(bootstrap, group, group + "-a", assignor), topic, events);
        Member b = new Member("b", classic(bootstrap, group, group + "-b", assignor), topic, events);
        Map<String, Object> out = obj("group", group, "events", events);

        a.thread.start();
        boolean aAlone = waitFor(() -> a.owned().size() == PARTITIONS);
        out.put("a_alone_owned", a.owned());
        b.thread.start();
        boolean shared = aAlone && waitFor(() -> {
            List<Integer> ownedA = a.owned(), ownedB = b.owned();
            Set<Integer> all = new HashSet<>(ownedA);
            all.addAll(ownedB);
            return !ownedA.isEmpty() && !ownedB.isEmpty() && all.size() == PARTITIONS
                && ownedA.size() + ownedB.size() == PARTITIONS;
        });
        out.put("owned", obj("a", a.owned(), "b", b.owned()));
        events.add(obj("member", "main", "call", shared ? "shared" : "not shared"));
        if (shared) {
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("client.id", group + "-producer");
            try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (int p = 0; p < PARTITIONS; p++)
                    for (int j = 0; j < PER_PARTITION; j++)
                        producer.send(new ProducerRecord<>(topic, p, null, group + "-" + p + "-" + j)).get();
            }
            waitFor(() -> a.records.size() + b.records.size() >= PARTITIONS * PER_PARTITION);
        }
        a.stop.set(true);
        b.stop.set(true);
        waitFor(() -> a.committed.get() && b.committed.get());
        a.leave.set(true);
        b.leave.set(true);
        a.thread.join();
        b.thread.join();
        out.put("records", obj("a", a.records, "b", b.records));
        out.put("failures", obj("a", a.failure, "b", b.failure));
        return out;
    }

    static Map<String, Object> consumerProtocol(String bootstrap, String topic, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", group);
        p.put("group.protocol", "consumer");
        long deadline = System.currentTimeMillis() + 15_000;
        int polls = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline) {
                polls++;
                c.poll(Duration.ofMillis(100));
                if (!c.assignment().isEmpty()) return obj("polls", polls, "assignment", c.assignment().toString());
            }
            return obj("polls", polls, "assignment", List.of());
        } catch (Exception e) {
            return obj("polls", polls, "exception", e.getClass().getName(), "message", e.getMessage());
        }
    }

    static boolean waitFor(BooleanSupplier condition) throws InterruptedException {
        long deadline = System.currentTimeMillis() + GIVE_UP_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) return false;
            Thread.sleep(20);
        }
        return true;
    }

    // -- JSON: maps, lists, strings, numbers, booleans, null; byte[] as base64 -------------

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof String s) return quote(s);
        if (o instanceof byte[] b) return quote(Base64.getEncoder().encodeToString(b));
        if (o instanceof Number || o instanceof Boolean) return o.toString();
        StringBuilder out = new StringBuilder();
        if (o instanceof Map<?, ?> m) {
            for (Map.Entry<?, ?> e : m.entrySet())
                out.append(out.length() == 0 ? "{" : ",").append(quote(String.valueOf(e.getKey())))
                   .append(':').append(json(e.getValue()));
            return out.length() == 0 ? "{}" : out.append('}').toString();
        }
        if (o instanceof Collection<?> c) {
            for (Object x : c) out.append(out.length() == 0 ? "[" : ",").append(json(x));
            return out.length() == 0 ? "[]" : out.append(']').toString();
        }
        return quote(o.toString());
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
