// The Java consumer without group membership: assign, seek, offsetsForTimes, commitSync and
// committed, on partitions 0 and 1 of a topic another client filled:
//
//     java -cp '.cache/java/kafka-clients-<version>/*' tests/java/Consume.java BOOTSTRAP TOPIC GROUP EXPECTED TS...
//
// EXPECTED is how many records the two partitions hold together; TS... are timestamps to look
// up in partition 0 (offsetsForTimes). The first consumer assigns both partitions, seeks to
// the beginning and reads everything, asks the beginning and end offsets and the offsets for
// the timestamps (and for one far in the future on partition 1), seeks partition 1 to offset 5
// and reads from there, then commits offsets with metadata for GROUP (commitSync) and reads
// them back (committed). A second consumer of GROUP assigns the same partitions and starts
// where the commits say. Prints one JSON object of what each call answered; exceptions are
// not caught (a stack trace on stderr, exit code 1).
//
// Compiles against kafka-clients 3.9 and 4.x. The source launcher compiles one file, so
// this program carries its own small JSON writer (as each program here does).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Consume {
    static final Duration POLL = Duration.ofMillis(100);
    static final long GIVE_UP_MS = 30_000;  // only against a hang: the test then sees too few records

    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        TopicPartition tp0 = new TopicPartition(topic, 0), tp1 = new TopicPartition(topic, 1);
        Set<TopicPartition> both = Set.of(tp0, tp1);
        Map<String, Object> out = obj("client_version", AppInfoParser.getVersion());

        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, "java-consume")) {
            c.assign(List.of(tp0, tp1));
            c.seekToBeginning(both);
            out.put("records", poll(c, expected));
            out.put("beginning_offsets", byPartition(c.beginningOffsets(both)));
            Map<TopicPartition, Long> end = c.endOffsets(both);
            out.put("end_offsets", byPartition(end));

            Map<TopicPartition, Long> query = new HashMap<>();
            List<Object> times = new ArrayList<>();
            for (int i = 4; i < args.length; i++) {
                query.put(tp0, Long.parseLong(args[i]));
                OffsetAndTimestamp found = c.offsetsForTimes(query).get(tp0);
                times.add(found == null ? null : List.of(found.offset(), found.timestamp()));
            }
            out.put("offsets_for_times_p0", times);
            Map<TopicPartition, OffsetAndTimestamp> future =
                c.offsetsForTimes(Map.of(tp1, System.currentTimeMillis() + 86_400_000L));
            out.put("offsets_for_future_time_p1", future.get(tp1) == null ? null : future.get(tp1).offset());

            c.seek(tp1, 5);
            out.put("after_seek_p1", poll(c, (int) (end.get(tp1) - 5)));

            c.commitSync(Map.of(tp0, new OffsetAndMetadata(7, "seven"), tp1, new OffsetAndMetadata(3, "three")));
            Map<String, Object> committed = new LinkedHashMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(both).entrySet())
                committed.put(String.valueOf(e.getKey().partition()),
                              List.of(e.getValue().offset(), e.getValue().metadata()));
            out.put("committed", committed);
        }

        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, "java-consume-again")) {
            c.assign(List.of(tp0, tp1));
            long p0 = c.position(tp0), p1 = c.position(tp1);
            Map<TopicPartition, Long> end = c.endOffsets(both);
            out.put("positions_from_commits", obj("0", p0, "1", p1));
            out.put("records_from_commits", poll(c, (int) (end.get(tp0) - p0 + end.get(tp1) - p1)));
        }
        System.out.println(json(out));
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String clientId) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", clientId);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        return new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    // Polls until n records came (or GIVE_UP_MS passed), each as the consumer gave it.
    static List<Object> poll(KafkaConsumer<byte[], byte[]> c, int n) {
        List<Object> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + GIVE_UP_MS;
        while (got.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) {
                List<Object> headers = new ArrayList<>();
                for (Header h : r.headers()) headers.add(Arrays.asList(h.key(), h.value()));
                got.add(obj("partition", r.partition(), "offset", r.offset(), "key", r.key(), "value", r.value(),
                            "headers", headers, "timestamp", r.timestamp(),
                            "timestamp_type", r.timestampType().toString(),
                            "leader_epoch", r.leaderEpoch().orElse(null)));
            }
        }
        return got;
    }

    static Map<String, Object> byPartition(Map<TopicPartition, Long> offsets) {
        Map<String, Object> m = new LinkedHashMap<>();
        offsets.entrySet().stream().sorted(Map.Entry.comparingByKey((a, b) -> a.partition() - b.partition()))
               .forEach(e -> m.put(String.valueOf(e.getKey().partition()), e.getValue()));
        return m;
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
