// The Java producer of `python -m lab.bench --failover --client java` (lab/bench/failover.py):
// one record of RECORD_BYTES every INTERVAL_US microseconds, round-robin over PARTITIONS
// partitions of TOPIC, acks=all, linger.ms=0, until its standard input closes; then it flushes and
// prints one line per record: "r <partition> <sent ns> <acked ns>" or "e <partition> <sent ns> <error>",
// and "done <sent> <unacknowledged>". Times are System.nanoTime(), CLOCK_MONOTONIC on Linux: the clock
// of Python's time.monotonic(), so the bench lines them up with its leader moves.
//
//     java -cp '.cache/java/kafka-clients-3.9.1/*' lab/bench/java/FailoverProducer.java \
//         BOOTSTRAP TOPIC PARTITIONS RECORD_BYTES INTERVAL_US
//
// It prints "ready" once it has the topic's metadata. Run by the JDK's source launcher: one file.

import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FailoverProducer {
    private record Outcome(int partition, long sentNs, long ackedNs, String error) {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int recordBytes = Integer.parseInt(args[3]);
        long intervalNs = Long.parseLong(args[4]) * 1000L;

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "failover-java");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        List<Outcome> outcomes = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // the bench closes our standard input to stop us
                }
            } catch (Exception e) {
                // closed
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        byte[] value = new byte[recordBytes];
        new Random(7).nextBytes(value);
        long sent = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.partitionsFor(topic);
            System.out.println("ready");
            System.out.flush();
            long next = System.nanoTime();
            while (!stop.get()) {
                long now = System.nanoTime();
                if (now < next) {
                    LockSupport.parkNanos(next - now);
                    continue;
                }
                int p = (int) (sent % partitions);
                long sentNs = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, p, null, value), (metadata, exception) -> {
                    long at = System.nanoTime();
                    synchronized (outcomes) {
                        outcomes.add(exception == null ? new Outcome(p, sentNs, at, null)
                                                       : new Outcome(p, sentNs, -1, exception.getClass().getSimpleName()));
                    }
                });
                sent++;
                next += intervalNs;
                if (next < now - 50_000_000L) {  // far behind (a stall): do not burst to catch up
                    next = now;
                }
            }
            producer.flush();
            producer.close(Duration.ofSeconds(30));
        }
        StringBuilder out = new StringBuilder();
        synchronized (outcomes) {
            for (Outcome o : outcomes) {
                if (o.error == null) {
                    out.append("r ").append(o.partition).append(' ').append(o.sentNs).append(' ').append(o.ackedNs);
                } else {
                    out.append("e ").append(o.partition).append(' ').append(o.sentNs).append(' ').append(o.error);
                }
                out.append('\n');
            }
            out.append("done ").append(sent).append(' ').append(sent - outcomes.size()).append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
