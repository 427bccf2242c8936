package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func ptr(s string) *string { return &s }

// step prints one step of the round trip: what it did and what it observed, with the
// call's error (per-item errors are in the fields).
func step(name string, err error, fields map[string]any) {
	fields["step"] = name
	fields["error"] = errName(err)
	emit(fields)
}

func configsOf(rc kadm.ResourceConfig) map[string]any {
	cs := map[string]any{}
	for _, c := range rc.Configs {
		cs[c.Key] = map[string]any{"value": c.Value, "source": c.Source.String(), "sensitive": c.Sensitive}
	}
	return cs
}

func partitionsOf(td kadm.TopicDetail) []map[string]any {
	var ps []map[string]any
	for _, p := range td.Partitions.Sorted() {
		ps = append(ps, map[string]any{"partition": p.Partition, "leader": p.Leader, "leader_epoch": p.LeaderEpoch,
			"replicas": p.Replicas, "isr": p.ISR, "error": errName(p.Err)})
	}
	return ps
}

func offsetsOf(lo kadm.ListedOffsets, topic string) map[int32]any {
	os := map[int32]any{}
	for p, o := range lo[topic] {
		os[p] = map[string]any{"offset": o.Offset, "leader_epoch": o.LeaderEpoch, "error": errName(o.Err)}
	}
	return os
}

func committedOf(rs kadm.OffsetResponses, topic string) map[int32]any {
	os := map[int32]any{}
	for p, o := range rs[topic] {
		os[p] = map[string]any{"offset": o.At, "leader_epoch": o.LeaderEpoch, "metadata": o.Metadata,
			"error": errName(o.Err)}
	}
	return os
}

type admin struct {
	ctx   context.Context
	adm   *kadm.Client
	topic string
	group string
}

func (a *admin) describeTopic(name string) {
	tds, err := a.adm.ListTopics(a.ctx, a.topic)
	td := tds[a.topic]
	step(name, err, map[string]any{"topic": td.Topic, "id": td.ID.String(), "internal": td.IsInternal,
		"partitions": partitionsOf(td), "topic_error": errName(td.Err)})
}

func (a *admin) describeConfigs(name string) {
	rcs, err := a.adm.DescribeTopicConfigs(a.ctx, a.topic)
	rc, _ := rcs.On(a.topic, nil)
	step(name, err, map[string]any{"configs": configsOf(rc), "resource_error": errName(rc.Err)})
}

func (a *admin) alterConfigs(name string, configs ...kadm.AlterConfig) {
	rs, err := a.adm.AlterTopicConfigs(a.ctx, configs, a.topic)
	r, _ := rs.On(a.topic, nil)
	step(name, err, map[string]any{"resource_error": errName(r.Err)})
}

func (a *admin) listOffsets(name string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) {
	lo, err := list(a.ctx, a.topic)
	step(name, err, map[string]any{"offsets": offsetsOf(lo, a.topic)})
}

func (a *admin) listGroups(name string) {
	lg, err := a.adm.ListGroups(a.ctx)
	var groups []map[string]any
	for _, g := range lg.Sorted() {
		groups = append(groups, map[string]any{"group": g.Group, "state": g.State,
			"protocol_type": g.ProtocolType, "coordinator": g.Coordinator})
	}
	step(name, err, map[string]any{"groups": groups})
}

func (a *admin) describeGroup(name string) {
	dgs, err := a.adm.DescribeGroups(a.ctx, a.group)
	dg := dgs[a.group]
	members := []map[string]any{}
	for _, m := range dg.Members {
		assigned := map[string][]int32{}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				assigned[t.Topic] = ps
			}
		}
		members = append(members, map[string]any{"member_id": m.MemberID, "client_id": m.ClientID,
			"client_host": m.ClientHost, "assigned": assigned})
	}
	step(name, err, map[string]any{"group": dg.Group, "state": dg.State, "protocol_type": dg.ProtocolType,
		"protocol": dg.Protocol, "coordinator": dg.Coordinator.NodeID, "members": members,
		"group_error": errName(dg.Err)})
}

func (a *admin) fetchOffsets(name string) {
	rs, err := a.adm.FetchOffsets(a.ctx, a.group)
	step(name, err, map[string]any{"offsets": committedOf(rs, a.topic)})
}

func (a *admin) commitOffsets(name string, partition int32, at int64, metadata string) {
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: a.topic, Partition: partition, At: at, LeaderEpoch: -1, Metadata: metadata})
	rs, err := a.adm.CommitOffsets(a.ctx, a.group, os)
	step(name, err, map[string]any{"offsets": committedOf(rs, a.topic)})
}

func (a *admin) deleteRecords(name string, partition int32, before int64) {
	var os kadm.Offsets
	os.AddOffset(a.topic, partition, before, -1)
	rs, err := a.adm.DeleteRecords(a.ctx, os)
	r, _ := rs.Lookup(a.topic, partition)
	step(name, err, map[string]any{"partition": partition, "low_watermark": r.LowWatermark,
		"partition_error": errName(r.Err)})
}

// consumeAsGroupMember joins the group with one franz-go member that reads count
// records and commits them, and returns it still in the group.
func (a *admin) consumeAsGroupMember(c *common, count int) *kgo.Client {
	cl, err := kgo.NewClient(append(c.clientOpts("refka-franz-admin-member"),
		kgo.ConsumerGroup(a.group), kgo.ConsumeTopics(a.topic),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())...)
	if err != nil {
		fatal("new member client: %v", err)
	}
	var records []*kgo.Record
	fetchErrs := map[string]int{} // "partition error" -> how many times
	for len(records) < count && a.ctx.Err() == nil {
		fetches := cl.PollRecords(a.ctx, count-len(records))
		fetches.EachError(func(_ string, p int32, err error) { fetchErrs[fmt.Sprintf("%d %v", p, errName(err))]++ })
		records = append(records, fetches.Records()...)
	}
	err = cl.CommitRecords(a.ctx, records...)
	memberID, generation := cl.GroupMetadata()
	step("member_consumed", err, map[string]any{"records": len(records), "member_id": memberID,
		"generation": generation, "fetch_errors": fetchErrs})
	return cl
}

func runAdmin(args []string) {
	var c common
	fs := flag.NewFlagSet("admin", flag.ExitOnError)
	c.register(fs)
	topic := fs.String("topic", "", "topic the round trip creates and deletes")
	group := fs.String("group", "", "group the round trip creates and deletes")
	replicationFactor := fs.Int("replication-factor", 3, "the topic's replication factor")
	fs.Parse(args)
	if *topic == "" || *group == "" {
		fatal("admin needs --topic and --group")
	}
	ctx, cancel := c.context()
	defer cancel()
	// A short MetadataMinAge: franz-go answers a Metadata request from what it fetched
	// within that age (5s by default), and the round trip lists topics right after
	// deleting one.
	cl, err := kgo.NewClient(append(c.clientOpts("refka-franz-admin"), kgo.MetadataMinAge(250*time.Millisecond))...)
	if err != nil {
		fatal("new client: %v", err)
	}
	defer cl.Close()
	a := &admin{ctx: ctx, adm: kadm.NewClient(cl), topic: *topic, group: *group}

	md, err := a.adm.BrokerMetadata(ctx)
	var brokers []map[string]any
	for _, b := range md.Brokers {
		brokers = append(brokers, map[string]any{"node_id": b.NodeID, "host": b.Host, "port": b.Port, "rack": b.Rack})
	}
	step("brokers", err, map[string]any{"cluster_id": md.Cluster, "controller": md.Controller, "brokers": brokers})

	// Topics. enable.ordered.delivery=false turns refka's KIP-253 partition deletion off
	// for this one, so that a lower partition count is refused as Kafka refuses it.
	created, err := a.adm.CreateTopic(ctx, 2, int16(*replicationFactor),
		map[string]*string{"retention.ms": ptr("3600000"), "enable.ordered.delivery": ptr("false")}, *topic)
	var createdRetention any
	if rc, ok := created.Configs["retention.ms"]; ok {
		createdRetention = map[string]any{"value": rc.Value, "source": rc.Source.String()}
	}
	step("create_topic", err, map[string]any{"topic": created.Topic, "id": created.ID.String(),
		"partitions": created.NumPartitions, "replication_factor": created.ReplicationFactor,
		"retention_ms": createdRetention})
	_, err = a.adm.CreateTopic(ctx, 2, int16(*replicationFactor), nil, *topic)
	step("create_topic_again", err, map[string]any{})

	all, err := a.adm.ListTopics(ctx)
	step("list_topics", err, map[string]any{"topics": all.Names()})
	a.describeTopic("describe_topic")

	// Partitions.
	cps, err := a.adm.CreatePartitions(ctx, 1, *topic)
	cp, _ := cps.On(*topic, nil)
	step("create_partitions", err, map[string]any{"topic_error": errName(cp.Err)})
	a.describeTopic("describe_topic_expanded")
	cps, err = a.adm.UpdatePartitions(ctx, 2, *topic)
	cp, _ = cps.On(*topic, nil)
	step("create_partitions_fewer", err, map[string]any{"topic_error": errName(cp.Err),
		"message": cp.ErrMessage})

	// Configs: incremental (IncrementalAlterConfigs), then the whole set (AlterConfigs).
	a.describeConfigs("describe_configs")
	a.alterConfigs("alter_configs",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: ptr("2097152")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: ptr("compact")})
	a.describeConfigs("describe_configs_altered")
	a.alterConfigs("alter_configs_subtract",
		kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("compact")})
	a.describeConfigs("describe_configs_subtracted")
	a.alterConfigs("alter_configs_bad_value",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("soon")})
	a.alterConfigs("alter_configs_unknown_name",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: ptr("1")})
	rs, err := a.adm.AlterTopicConfigsState(ctx,
		[]kadm.AlterConfig{{Name: "retention.ms", Value: ptr("86400000")}}, *topic)
	r, _ := rs.On(*topic, nil)
	step("alter_configs_state", err, map[string]any{"resource_error": errName(r.Err)})
	a.describeConfigs("describe_configs_state")

	// Records: four to each of the three partitions.
	pcl, err := kgo.NewClient(append(c.clientOpts("refka-franz-admin-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		fatal("new producer client: %v", err)
	}
	var records []*kgo.Record
	for p := range int32(3) {
		for i := range 4 {
			records = append(records, &kgo.Record{Topic: *topic, Partition: p,
				Key: []byte{byte('a' + i)}, Value: fmt.Appendf(nil, "kadm record %d/%d", p, i)})
		}
	}
	var produced []map[string]any
	stored := 0
	for _, res := range pcl.ProduceSync(ctx, records...) {
		produced = append(produced, map[string]any{"partition": res.Record.Partition, "offset": res.Record.Offset,
			"error": errName(res.Err)})
		if res.Err == nil {
			stored++
		}
	}
	pcl.Close()
	step("produce", nil, map[string]any{"records": produced})
	a.listOffsets("list_end_offsets", a.adm.ListEndOffsets)
	a.listOffsets("list_start_offsets", a.adm.ListStartOffsets)

	// The group: a member reads and commits; the admin sees it, then the offsets.
	member := a.consumeAsGroupMember(&c, stored)
	a.listGroups("list_groups")
	a.describeGroup("describe_group")
	a.commitOffsets("commit_offsets_member_active", 0, 1, "by kadm")
	err = member.LeaveGroupContext(ctx)
	member.Close()
	step("member_left", err, map[string]any{})
	a.describeGroup("describe_group_empty")
	a.fetchOffsets("fetch_offsets")
	a.commitOffsets("commit_offsets", 0, 1, "rewound by kadm")
	a.fetchOffsets("fetch_offsets_committed")

	// Records deleted before an offset.
	a.deleteRecords("delete_records", 0, 2)
	a.listOffsets("list_start_offsets_after_delete", a.adm.ListStartOffsets)
	a.deleteRecords("delete_records_past_end", 1, 100)

	// Deletions.
	dg, err := a.adm.DeleteGroup(ctx, *group)
	step("delete_group", err, map[string]any{"group": dg.Group})
	a.listGroups("list_groups_after_delete")
	_, err = a.adm.DeleteGroup(ctx, *group)
	step("delete_group_again", err, map[string]any{})

	dt, err := a.adm.DeleteTopic(ctx, *topic)
	step("delete_topic", err, map[string]any{"topic": dt.Topic})
	// franz-go answers ListTopics from metadata it fetched within MetadataMinAge, which
	// may predate the deletion: listed again until the topic is gone (bounded by the
	// command's deadline).
	listings := 0
	for ; ctx.Err() == nil; listings++ {
		all, err = a.adm.ListTopics(ctx)
		if err == nil && !all.Has(*topic) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	step("topic_gone", ctx.Err(), map[string]any{"listings": listings + 1, "topics": all.Names()})
	a.describeConfigs("describe_configs_deleted")
	_, err = a.adm.DeleteTopic(ctx, *topic)
	step("delete_topic_again", err, map[string]any{})
}
