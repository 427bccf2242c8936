// The Java producer's settings, one case per partition of one topic:
//
//     java -cp '.cache/java/kafka-clients-<version>/*' tests/java/Produce.java BOOTSTRAP TOPIC
//
// Case i (CASES below) sends 20 records to partition i of TOPIC with a producer of its own
// configured as the case says: acks 0, 1 and all without idempotence, the idempotent
// producer, each compression codec, and records with awkward headers. Records: a null key,
// a null value, compressible values ending in binary bytes, explicit create times.
// Prints one JSON object: the client's version, and per case its settings, each record as
// sent (bytes base64) with the partition, offset and timestamp the producer reported, and
// the exceptions it raised. tests/integration/test_java_client.py reads the records back
// with confluent-kafka and looks at the batches the broker stores.
//
// Compiles against kafka-clients 3.9 and 4.x. The source launcher compiles one file, so
// this program carries its own small JSON writer (as each program here does).

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Produce {
    static final int RECORDS = 20;

    // name, then producer settings (key, value, ...)
    static final String[][] CASES = {
        {"acks=0", "acks", "0", "enable.idempotence", "false"},
        {"acks=1", "acks", "1", "enable.idempotence", "false"},
        {"acks=all", "acks", "all", "enable.idempotence", "false"},
        {"idempotent", "acks", "all", "enable.idempotence", "true", "max.in.flight.requests.per.connection", "5"},
        {"gzip", "compression.type", "gzip"},
        {"snappy", "compression.type", "snappy"},
        {"lz4", "compression.type", "lz4"},
        {"zstd", "compression.type", "zstd"},
        {"headers"},
    };

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long baseTimestamp = System.currentTimeMillis() - 60_000;
        List<Object> cases = new ArrayList<>();
        for (int partition = 0; partition < CASES.length; partition++) {
            String[] c = CASES[partition];
            Properties props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("client.id", "java-produce-" + c[0]);
            props.put("linger.ms", "20");
            Map<String, Object> settings = new LinkedHashMap<>();
            for (int k = 1; k + 1 < c.length; k += 2) {
                props.put(c[k], c[k + 1]);
                settings.put(c[k], c[k + 1]);
            }
            cases.add(runCase(c[0], settings, props, topic, partition, baseTimestamp));
        }
        System.out.println(json(obj("client_version", AppInfoParser.getVersion(), "cases", cases)));
    }

    static Map<String, Object> runCase(String name, Map<String, Object> settings, Properties props, String topic,
                                       int partition, long baseTimestamp) {
        List<Object> records = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int j = 0; j < RECORDS; j++) {
                byte[] key = j == 0 ? null : ("key-" + name + "-" + j).getBytes(StandardCharsets.UTF_8);
                byte[] value = j == 1 ? null : value(name, j);
                List<Header> headers = name.equals("headers") ? headers(j) : List.of();
                ProducerRecord<byte[], byte[]> r =
                    new ProducerRecord<>(topic, partition, baseTimestamp + j, key, value, headers);
                sent.add(r);
                acks.add(producer.send(r));
            }
            producer.flush();
            for (int j = 0; j < RECORDS; j++) {
                ProducerRecord<byte[], byte[]> r = sent.get(j);
                List<Object> hs = new ArrayList<>();
                for (Header h : r.headers()) hs.add(Arrays.asList(h.key(), h.value()));
                Map<String, Object> rec = obj("key", r.key(), "value", r.value(), "headers", hs,
                                              "timestamp", r.timestamp());
                try {
                    RecordMetadata m = acks.get(j).get();
                    rec.put("partition", m.partition());
                    rec.put("offset", m.hasOffset() ? m.offset() : null);
                    rec.put("reported_timestamp", m.timestamp());
                } catch (ExecutionException e) {
                    errors.add(e.getCause().toString());
                }
                records.add(rec);
            }
        } catch (Exception e) {
            errors.add(e.toString());
        }
        return obj("name", name, "partition", partition, "settings", settings, "records", records,
                   "errors", errors);
    }

    // Compressible text, then bytes no text codec would leave alone.
    static byte[] value(String name, int j) {
        byte[] text = ("value " + j + " of " + name + ", ").repeat(16).getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[text.length + 3];
        System.arraycopy(text, 0, out, 0, text.length);
        out[text.length] = 0;
        out[text.length + 1] = (byte) 0xff;
        out[text.length + 2] = (byte) j;
        return out;
    }

    // A repeated name, a null value, an empty value, binary bytes, a non-ASCII name.
    static List<Header> headers(int j) {
        return List.of(
            new RecordHeader("trace", ("id-" + j).getBytes(StandardCharsets.UTF_8)),
            new RecordHeader("trace", "again".getBytes(StandardCharsets.UTF_8)),
            new RecordHeader("nullable", null),
            new RecordHeader("empty", new byte[0]),
            new RecordHeader("bin", new byte[] {0, 1, (byte) 0x80, (byte) 0xff}),
            new RecordHeader("cl\u00e9", "\u00e9t\u00e9".getBytes(StandardCharsets.UTF_8)));
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
