// A Java producer and consumer that keep going while the test moves a partition's leader:
//
//     java -cp '.cache/java/kafka-clients-<version>/*' tests/java/Failover.java BOOTSTRAP TOPIC
//
// The producer (acks=all, idempotent, client.id TOPIC-producer) sends r000000, r000001, ... to
// partition 0 of TOPIC, at most 100 unacknowledged at a time; the consumer (assign, from the
// beginning, no group, client.id TOPIC-consumer) reads partition 0 in the same loop. While
// running it prints a JSON line {"acked": n, "consumed": m} whenever those counts changed (at
// most every 50 ms). A line "stop" on stdin ends the sending; the producer is flushed, the
// consumer reads until it has every acknowledged record (or 30 s pass), and the last line
// printed is one JSON object: the client's version, how many records were sent, each one's
// acknowledged offset (null if it failed), the send errors, and what the consumer read
// (offset, value) in order.
//
// Compiles against kafka-clients 3.9 and 4.x. The source launcher compiles one file, so
// this program carries its own small JSON writer (as each program here does).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Failover {
    static final int MAX_UNACKNOWLEDGED = 100;
    static final long GIVE_UP_MS = 30_000;  // only against a hang: the test then sees what is missing

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        TopicPartition tp = new TopicPartition(topic, 0);
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; )
                    if (line.trim().equals("stop")) break;
            } catch (Exception e) {
                // end of input is a stop too
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("client.id", topic + "-producer");
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "5");
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("client.id", topic + "-consumer");
        cp.put("fetch.max.wait.ms", "100");

        Map<Integer, Long> acked = new ConcurrentHashMap<>();
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        List<Object> consumed = new ArrayList<>();
        int sent = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer());
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            String lastProgress = "";
            long lastPrinted = 0;
            while (!stop.get()) {
                if (sent - acked.size() - errors.size() < MAX_UNACKNOWLEDGED) {
                    final int i = sent++;
                    producer.send(new ProducerRecord<>(topic, 0, null, String.format("r%06d", i)), (md, e) -> {
                        if (e != null) errors.put(i, e.toString());
                        else acked.put(i, md.offset());
                    });
                }
                read(consumer, consumed, Duration.ofMillis(5));
                String progress = json(obj("acked", acked.size(), "consumed", consumed.size()));
                if (!progress.equals(lastProgress) && System.currentTimeMillis() - lastPrinted >= 50) {
                    System.out.println(progress);
                    System.out.flush();
                    lastProgress = progress;
                    lastPrinted = System.currentTimeMillis();
                }
            }
            producer.flush();
            long deadline = System.currentTimeMillis() + GIVE_UP_MS;
            while (consumed.size() < acked.size() && System.currentTimeMillis() < deadline)
                read(consumer, consumed, Duration.ofMillis(100));
        }
        List<Object> offsets = new ArrayList<>();
        for (int i = 0; i < sent; i++) offsets.add(acked.get(i));
        System.out.println(json(obj("client_version", AppInfoParser.getVersion(), "sent", sent,
                                    "acked_offsets", offsets, "errors", new ArrayList<>(errors.values()),
                                    "consumed", consumed)));
    }

    static void read(KafkaConsumer<String, String> consumer, List<Object> into, Duration wait) {
        for (ConsumerRecord<String, String> r : consumer.poll(wait)) into.add(List.of(r.offset(), r.value()));
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
