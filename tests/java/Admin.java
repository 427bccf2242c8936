// The Java AdminClient, one call after another, on topics and a group of its own:
//
//     java -cp '.cache/java/kafka-clients-<version>/*' tests/java/Admin.java BOOTSTRAP PREFIX
//
// On a cluster of brokers 0, 1 and 2: topic PREFIX-a (2 partitions, 2 replicas, retention.ms
// set) and PREFIX-b (replicas [0,1] and [1,2]) are created, listed and described; a's configs
// described and changed (incrementalAlterConfigs), its partitions grown (createPartitions), its
// first records deleted (deleteRecords); a consumer group PREFIX-g listed, described, its
// offsets listed and altered, then deleted; b's replicas reassigned
// (alterPartitionReassignments, listPartitionReassignments) and its preferred leaders elected
// (electLeaders); a shrunk to 3 partitions, then deleted. Requests Kafka refuses are made too (a
// topic that exists, fewer partitions, a bad config value, a group with a member, ...).
// Prints one JSON object: per step, {"ok": what the call answered} or {"error": the exception's
// simple class name, "message": its message}. Compiles against kafka-clients 3.9 and 4.x. The
// source launcher compiles one file, so this program carries its own small JSON writer (as each
// program here does).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Admin {
    static final long GIVE_UP_MS = 30_000;  // only against a hang: the step then shows what it last saw
    static final Map<String, Object> out = new LinkedHashMap<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        String a = prefix + "-a", b = prefix + "-b", group = prefix + "-g";
        TopicPartition a0 = new TopicPartition(a, 0), a1 = new TopicPartition(a, 1);
        TopicPartition b0 = new TopicPartition(b, 0), b1 = new TopicPartition(b, 1);
        ConfigResource aConfigs = new ConfigResource(ConfigResource.Type.TOPIC, a);
        out.put("client_version", AppInfoParser.getVersion());

        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", prefix + "-admin");
        try (AdminClient admin = AdminClient.create(props)) {
            step("describe_cluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                return obj("cluster_id", c.clusterId().get(), "controller", c.controller().get().id(),
                           "nodes", c.nodes().get().stream().map(Node::id).sorted().toList());
            });

            // -- topics
            step("create_topics", () -> {
                CreateTopicsResult r = admin.createTopics(List.of(
                    new NewTopic(a, 2, (short) 2).configs(Map.of("retention.ms", "3600000")),
                    new NewTopic(b, Map.of(0, List.of(0, 1), 1, List.of(1, 2)))));
                r.all().get();
                return obj("a_partitions", r.numPartitions(a).get(), "a_replication_factor", r.replicationFactor(a).get(),
                           "a_retention_ms", r.config(a).get().get("retention.ms").value(),
                           "b_partitions", r.numPartitions(b).get(), "a_topic_id", r.topicId(a).get().toString());
            });
            step("create_existing_topic", () -> admin.createTopics(List.of(new NewTopic(a, 1, (short) 1))).all().get());
            step("list_topics", () -> admin.listTopics().names().get().stream()
                .filter(t -> t.startsWith(prefix)).sorted().toList());
            step("describe_topics", () -> {
                Map<String, Object> topics = new TreeMap<>();
                admin.describeTopics(List.of(a, b)).allTopicNames().get()
                     .forEach((name, d) -> topics.put(name, describe(d)));
                return topics;
            });

            // -- configs
            step("describe_configs", () -> configs(admin, aConfigs));
            step("incremental_alter_configs", () -> {
                admin.incrementalAlterConfigs(Map.of(aConfigs, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
                return configs(admin, aConfigs);
            });
            step("incremental_alter_configs_bad_value", () -> admin.incrementalAlterConfigs(Map.of(aConfigs, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get());

            // -- partitions and records
            step("create_partitions", () -> {
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(4))).all().get();
                return waitFor(() -> admin.describeTopics(List.of(a)).allTopicNames().get().get(a).partitions().size(),
                               n -> n == 4);
            });
            step("create_partitions_below_the_initial_count", () ->
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(1))).all().get());
            step("delete_records", () -> {
                produce(bootstrap, a0, 10);
                long low = admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(4))).lowWatermarks()
                                .get(a0).get().lowWatermark();
                long earliest = admin.listOffsets(Map.of(a0, OffsetSpec.earliest())).partitionResult(a0).get().offset();
                long latest = admin.listOffsets(Map.of(a0, OffsetSpec.latest())).partitionResult(a0).get().offset();
                return obj("low_watermark", low, "earliest", earliest, "latest", latest);
            });
            step("delete_records_past_the_end", () ->
                admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(100))).all().get());

            // -- a consumer group, first with a member, then empty
            try (KafkaConsumer<String, String> member = member(bootstrap, group, prefix + "-member")) {
                step("join_and_commit", () -> {
                    member.subscribe(List.of(a));
                    Set<TopicPartition> assigned = waitFor(() -> {
                        member.poll(Duration.ofMillis(100));
                        return member.assignment();
                    }, s -> !s.isEmpty());
                    member.commitSync(Map.of(a0, new OffsetAndMetadata(6, "six")));
                    return assigned.stream().map(TopicPartition::partition).sorted().toList();
                });
                step("list_consumer_groups", () -> listGroups(admin, prefix));
                step("describe_consumer_groups", () -> describeGroup(admin, group));
                step("list_consumer_group_offsets", () -> groupOffsets(admin, group));
                step("delete_consumer_groups_with_a_member", () -> admin.deleteConsumerGroups(List.of(group)).all().get());
                step("alter_consumer_group_offsets_with_a_member", () -> admin.alterConsumerGroupOffsets(
                    group, Map.of(a0, new OffsetAndMetadata(1))).all().get());
            }
            step("describe_consumer_groups_empty", () -> describeGroup(admin, group));
            step("alter_consumer_group_offsets", () -> {
                admin.alterConsumerGroupOffsets(group, Map.of(a0, new OffsetAndMetadata(2), a1, new OffsetAndMetadata(1)))
                     .all().get();
                return groupOffsets(admin, group);
            });
            step("delete_consumer_groups", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                return obj("listed", listGroups(admin, prefix), "described", describeGroup(admin, group));
            });

            // -- reassignment and preferred leaders
            step("alter_partition_reassignments", () -> {
                admin.alterPartitionReassignments(Map.of(
                    b0, Optional.of(new NewPartitionReassignment(List.of(1, 0))),
                    b1, Optional.of(new NewPartitionReassignment(List.of(2, 0))))).all().get();
                Map<String, Object> done = waitFor(() -> describe(admin.describeTopics(List.of(b)).allTopicNames().get().get(b)),
                    d -> d.get("partitions").equals(List.of(partition(0, 0, List.of(1, 0)), partition(1, 2, List.of(2, 0)))));
                Map<TopicPartition, PartitionReassignment> ongoing = admin.listPartitionReassignments(Set.of(b0, b1))
                                                                          .reassignments().get();
                return obj("described", done,
                           "ongoing_after", ongoing.keySet().stream().map(TopicPartition::toString).sorted().toList());
            });
            step("alter_partition_reassignments_unknown_broker", () -> admin.alterPartitionReassignments(Map.of(
                b0, Optional.of(new NewPartitionReassignment(List.of(1, 7))))).all().get());
            step("cancel_partition_reassignment_none_ongoing", () ->
                admin.alterPartitionReassignments(Map.of(b0, Optional.empty())).all().get());
            step("elect_leaders", () -> {
                Map<TopicPartition, Optional<Throwable>> results =
                    admin.electLeaders(ElectionType.PREFERRED, Set.of(b0, b1)).partitions().get();
                Map<String, Object> perPartition = new TreeMap<>();
                results.forEach((tp, error) -> perPartition.put(tp.toString(),
                    error.map(e -> (Object) e.getClass().getSimpleName()).orElse("elected")));
                Object leaders = waitFor(() -> describe(admin.describeTopics(List.of(b)).allTopicNames().get().get(b)),
                    d -> d.get("partitions").equals(List.of(partition(0, 1, List.of(1, 0)), partition(1, 2, List.of(2, 0)))));
                return obj("results", perPartition, "described", leaders);
            });

            // -- fewer partitions, then deletion
            step("create_partitions_fewer", () ->  // Kafka refuses it; refka shrinks (KIP-253)
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(3))).all().get());
            step("delete_topics", () -> {
                admin.deleteTopics(List.of(a)).all().get();
                return waitFor(() -> admin.listTopics().names().get().stream().filter(t -> t.startsWith(prefix))
                                          .sorted().toList(), names -> !names.contains(a));
            });
            step("describe_deleted_topic", () -> admin.describeTopics(List.of(a)).allTopicNames().get());
            step("delete_deleted_topic", () -> admin.deleteTopics(List.of(a)).all().get());
        }
        System.out.println(json(out));
    }

    static void step(String name, Callable<Object> call) {
        try {
            out.put(name, obj("ok", call.call()));
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            out.put(name, obj("error", t.getClass().getSimpleName(), "message", t.getMessage()));
        }
    }

    // The call's answer once ``done`` holds of it, or its last answer after GIVE_UP_MS.
    static <T> T waitFor(Callable<T> call, Predicate<T> done) throws Exception {
        long deadline = System.currentTimeMillis() + GIVE_UP_MS;
        while (true) {
            T v = call.call();
            if (done.test(v) || System.currentTimeMillis() > deadline) return v;
            Thread.sleep(50);
        }
    }

    static Map<String, Object> partition(int index, int leader, List<Integer> replicas) {
        return obj("partition", index, "leader", leader, "replicas", replicas);
    }

    static Map<String, Object> describe(TopicDescription d) {
        List<Object> parts = new ArrayList<>();
        List<Object> isrs = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            parts.add(partition(p.partition(), p.leader() == null ? -1 : p.leader().id(),
                                p.replicas().stream().map(Node::id).toList()));
            isrs.add(p.isr().stream().map(Node::id).sorted().toList());
        }
        return obj("internal", d.isInternal(), "topic_id", d.topicId().toString(), "partitions", parts, "isr", isrs);
    }

    static Map<String, Object> configs(AdminClient admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> m = new TreeMap<>();
        for (String name : List.of("cleanup.policy", "max.message.bytes", "retention.ms", "min.insync.replicas")) {
            ConfigEntry e = config.get(name);
            m.put(name, e == null ? null : obj("value", e.value(), "source", e.source().toString(),
                                               "read_only", e.isReadOnly(), "sensitive", e.isSensitive()));
        }
        return m;
    }

    // listConsumerGroups (for removal, Admin.listGroups replaces it) and ConsumerGroupListing.state:
    // deprecated in 4.1, the only calls there are in 3.9.
    @SuppressWarnings({"deprecation", "removal"})
    static Map<String, Object> listGroups(AdminClient admin, String prefix) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (ConsumerGroupListing g : admin.listConsumerGroups().all().get())
            if (g.groupId().startsWith(prefix))
                m.put(g.groupId(), obj("simple", g.isSimpleConsumerGroup(), "state", g.state().map(Object::toString).orElse(null)));
        return m;
    }

    @SuppressWarnings("deprecation")  // ConsumerGroupDescription.state: deprecated in 4.x, not in 3.9
    static Map<String, Object> describeGroup(AdminClient admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members())
            members.add(obj("client_id", m.clientId(), "partitions",
                            m.assignment().topicPartitions().stream().map(TopicPartition::toString).sorted().toList()));
        return obj("state", d.state().toString(), "assignor", d.partitionAssignor(), "simple", d.isSimpleConsumerGroup(),
                   "coordinator", d.coordinator() == null ? null : d.coordinator().id(), "members", members);
    }

    static Map<String, Object> groupOffsets(AdminClient admin, String group) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
             .forEach((tp, o) -> m.put(tp.toString(), o == null ? null : List.of(o.offset(), o.metadata())));
        return m;
    }

    static KafkaConsumer<String, String> member(String bootstrap, String group, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("enable.auto.commit", "false");
        p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void produce(String bootstrap, TopicPartition tp, int n) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < n; i++) producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), "k" + i, "r" + i)).get();
        }
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
