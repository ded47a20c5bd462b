package raftmeta

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Records have two encodings.
//
// JSON (EncodeRecord) is a type tag and the record's fields: readable in a
// dump, stable as long as fields are only added, deterministic (struct
// fields in order, map keys sorted). The single-node journal writes it, and
// relies on it: its scan for whole frames after damage skips a body that
// does not open and close like a JSON object.
//
// Binary (AppendBinaryRecord) is for the quorum's log and for snapshots,
// where JSON is too slow and too large. Measured on the 2-core machine of
// the project (bench_test.go): a 100,000-partition topic of three replicas
// is 1.4 MB in binary and a snapshot of it loads in about 40 ms, where its
// JSON is 9.7 MB and takes half a second to write and read back; a
// partition change is 26 bytes and decodes and applies at about 1.9
// million records/s, where its JSON is 149 bytes and goes at 250,000/s,
// barely above the target of 200,000/s with nothing else to do. The
// layout, all integers varints (zigzag for signed ones) unless said
// otherwise:
//
//	record    = format(1 byte, binaryFormat) type(1 byte) body
//	string    = uvarint length, bytes
//	uuid      = 16 bytes
//	int32s    = uvarint (count+1), then each; 0 means absent (nil)
//	partition = index, int32s replicas, int32s isr, leader, leader epoch, partition epoch
//	            [int32s elr, int32s last known elr: only in the ...ELR and ...Reassign types below]
//	            [int32s adding, int32s removing: only in the ...Reassign types below]
//	broker    = id, uuid incarnation, epoch, uvarint count, (string name, string host, port)*,
//	            string rack, flags(1 byte: 1 fenced, 2 in controlled shutdown)
//
// and each type's body is its fields in declaration order. Eligible leader
// replicas (KIP-966) came later: a create-topic, create-partitions or
// partition-change record that carries none is written in its first
// layout, byte for byte as before, and one that does takes a type code of
// its own whose body adds them (each partition's ELR and last known ELR;
// a change's ELR and last known ELR after its other fields), so entries
// and snapshots written before still decode, and an older reader refuses
// a record it cannot represent rather than dropping its ELR. Reassignments
// (KIP-455) came after in the same way: a record that carries adding or
// removing replicas takes a third type code, whose body is the ELR layout
// with each partition's (or the change's) adding and removing replicas
// after its ELR fields. A decoder refuses
// a record of another format, an unknown type, a truncated body and bytes
// left over: bad input is an error, never a panic.
//
// DecodeRecord tells the two apart by the first byte ('{' for JSON).

// binaryFormat is the first byte of a binary record; a new layout takes a
// new value.
const binaryFormat = 0x01

// Binary type codes. Never reuse one.
const (
	codeClusterID        = 1
	codeRegisterBroker   = 2
	codeCreateTopic      = 3
	codeDeleteTopic      = 4
	codeConfig           = 5
	codeProducerIDs      = 6
	codeBrokerChange     = 7
	codeUnregisterBroker = 8
	codeCreatePartitions = 9
	codePartitionChange  = 10
	// The same records, carrying ELR fields.
	codeCreateTopicELR      = 11
	codeCreatePartitionsELR = 12
	codePartitionChangeELR  = 13
	// The same records, carrying ELR and reassignment fields.
	codeCreateTopicReassign      = 14
	codeCreatePartitionsReassign = 15
	codePartitionChangeReassign  = 16
)

// partitionLayout is which fields a record's partitions carry.
type partitionLayout int

const (
	layoutBase partitionLayout = iota
	layoutELR
	layoutReassign
)

// layoutOf is the smallest layout that holds every field of ps.
func layoutOf(ps []Partition) partitionLayout {
	layout := layoutBase
	for i := range ps {
		if ps[i].Reassigning() {
			return layoutReassign
		}
		if len(ps[i].ELR) > 0 || len(ps[i].LastKnownELR) > 0 {
			layout = layoutELR
		}
	}
	return layout
}

// codeFor picks a record's type code by its layout.
func codeFor(layout partitionLayout, base, elr, reassign byte) byte {
	switch layout {
	case layoutELR:
		return elr
	case layoutReassign:
		return reassign
	}
	return base
}

// envelope is a record's JSON encoding: its type tag and its body.
type envelope struct {
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// EncodeRecord encodes r as JSON, for the journal.
func EncodeRecord(r Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.recordType(), err)
	}
	return json.Marshal(envelope{Type: r.recordType(), Body: body})
}

// DecodeRecord decodes what EncodeRecord or AppendBinaryRecord produced.
func DecodeRecord(p []byte) (Record, error) {
	if len(p) > 0 && p[0] == binaryFormat {
		return decodeBinaryRecord(p)
	}
	var e envelope
	if err := json.Unmarshal(p, &e); err != nil {
		return nil, fmt.Errorf("decode record envelope: %w", err)
	}
	switch e.Type {
	case "cluster_id":
		return decodeBody[ClusterIDRecord](e)
	case "register_broker":
		return decodeBody[RegisterBrokerRecord](e)
	case "broker_change":
		return decodeBody[BrokerChangeRecord](e)
	case "unregister_broker":
		return decodeBody[UnregisterBrokerRecord](e)
	case "create_topic":
		return decodeBody[CreateTopicRecord](e)
	case "delete_topic":
		return decodeBody[DeleteTopicRecord](e)
	case "create_partitions":
		return decodeBody[CreatePartitionsRecord](e)
	case "partition_change":
		return decodeBody[PartitionChangeRecord](e)
	case "config":
		return decodeBody[ConfigRecord](e)
	case "producer_ids":
		return decodeBody[ProducerIDsRecord](e)
	}
	return nil, fmt.Errorf("decode record: unknown type %q", e.Type)
}

func decodeBody[R Record](e envelope) (Record, error) {
	var r R
	if err := json.Unmarshal(e.Body, &r); err != nil {
		return nil, fmt.Errorf("decode %s record: %w", e.Type, err)
	}
	return r, nil
}

// EncodeBinaryRecord returns r's binary encoding.
func EncodeBinaryRecord(r Record) ([]byte, error) { return AppendBinaryRecord(nil, r) }

// AppendBinaryRecord appends r's binary encoding to dst. A pointer to a
// record encodes as the record.
func AppendBinaryRecord(dst []byte, r Record) ([]byte, error) {
	if v, ok := derefRecord(r); ok {
		r = v
	}
	e := encoder{b: dst}
	e.b = append(e.b, binaryFormat)
	switch r := r.(type) {
	case ClusterIDRecord:
		e.b = append(e.b, codeClusterID)
		e.str(r.ClusterID)
	case RegisterBrokerRecord:
		e.b = append(e.b, codeRegisterBroker)
		e.broker(normalizeBroker(r.Broker))
	case BrokerChangeRecord:
		e.b = append(e.b, codeBrokerChange)
		e.int(int64(r.BrokerID))
		e.int(r.BrokerEpoch)
		e.b = append(e.b, byte(r.Change))
	case UnregisterBrokerRecord:
		e.b = append(e.b, codeUnregisterBroker)
		e.int(int64(r.BrokerID))
		e.int(r.BrokerEpoch)
	case CreateTopicRecord:
		layout := layoutOf(r.Topic.Partitions)
		e.b = append(e.b, codeFor(layout, codeCreateTopic, codeCreateTopicELR, codeCreateTopicReassign))
		e.str(r.Topic.Name)
		e.b = append(e.b, r.Topic.ID[:]...)
		e.partitions(r.Topic.Partitions, layout)
		e.configs(r.Topic.Configs)
	case DeleteTopicRecord:
		e.b = append(e.b, codeDeleteTopic)
		e.b = append(e.b, r.ID[:]...)
	case CreatePartitionsRecord:
		layout := layoutOf(r.Partitions)
		e.b = append(e.b, codeFor(layout, codeCreatePartitions, codeCreatePartitionsELR, codeCreatePartitionsReassign))
		e.b = append(e.b, r.Topic[:]...)
		e.partitions(r.Partitions, layout)
	case PartitionChangeRecord:
		layout := layoutBase
		switch {
		case r.AddingReplicas != nil || r.RemovingReplicas != nil:
			layout = layoutReassign
		case r.ELR != nil || r.LastKnownELR != nil:
			layout = layoutELR
		}
		e.b = append(e.b, codeFor(layout, codePartitionChange, codePartitionChangeELR, codePartitionChangeReassign))
		e.b = append(e.b, r.Topic[:]...)
		e.int(int64(r.Partition))
		e.int(int64(r.Leader))
		e.int32s(r.ISR)
		e.int32s(r.Replicas)
		e.int(int64(r.LeaderEpoch))
		e.int(int64(r.PartitionEpoch))
		if layout != layoutBase {
			e.int32s(r.ELR)
			e.int32s(r.LastKnownELR)
		}
		if layout == layoutReassign {
			e.int32s(r.AddingReplicas)
			e.int32s(r.RemovingReplicas)
		}
	case ConfigRecord:
		e.b = append(e.b, codeConfig)
		e.str(string(r.Resource))
		e.str(r.Name)
		e.str(r.Key)
		if r.Value == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.str(*r.Value)
		}
	case ProducerIDsRecord:
		e.b = append(e.b, codeProducerIDs)
		e.int(r.First)
		e.int(r.Count)
	default:
		return dst, fmt.Errorf("encode record: no binary encoding for %T", r)
	}
	return e.b, nil
}

func deref[R Record](p *R) (Record, bool) {
	if p == nil {
		return nil, false
	}
	return *p, true
}

// derefRecord returns the record a pointer points to.
func derefRecord(r Record) (Record, bool) {
	switch p := r.(type) {
	case *ClusterIDRecord:
		return deref(p)
	case *RegisterBrokerRecord:
		return deref(p)
	case *BrokerChangeRecord:
		return deref(p)
	case *UnregisterBrokerRecord:
		return deref(p)
	case *CreateTopicRecord:
		return deref(p)
	case *DeleteTopicRecord:
		return deref(p)
	case *CreatePartitionsRecord:
		return deref(p)
	case *PartitionChangeRecord:
		return deref(p)
	case *ConfigRecord:
		return deref(p)
	case *ProducerIDsRecord:
		return deref(p)
	}
	return nil, false
}

type encoder struct{ b []byte }

func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) int32s(ids []int32) {
	if ids == nil {
		e.uint(0)
		return
	}
	e.uint(uint64(len(ids)) + 1)
	for _, id := range ids {
		e.int(int64(id))
	}
}

// partitions writes ps in the layout given. A nil ISR
// (which Equal cannot tell from an empty one) is written as empty, and an
// empty ELR as none, so that equal images encode equally.
func (e *encoder) partitions(ps []Partition, layout partitionLayout) {
	e.uint(uint64(len(ps)))
	for i := range ps {
		p := &ps[i]
		e.int(int64(p.Index))
		e.int32s(p.Replicas)
		if p.ISR == nil {
			e.int32s([]int32{})
		} else {
			e.int32s(p.ISR)
		}
		e.int(int64(p.Leader))
		e.int(int64(p.LeaderEpoch))
		e.int(int64(p.PartitionEpoch))
		if layout != layoutBase {
			e.int32s(nilIfEmpty(p.ELR))
			e.int32s(nilIfEmpty(p.LastKnownELR))
		}
		if layout == layoutReassign {
			e.int32s(nilIfEmpty(p.AddingReplicas))
			e.int32s(nilIfEmpty(p.RemovingReplicas))
		}
	}
}

func (e *encoder) configs(c map[string]string) {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(c[k])
	}
}

func (e *encoder) broker(b Broker) {
	e.int(int64(b.ID))
	e.b = append(e.b, b.IncarnationID[:]...)
	e.int(b.Epoch)
	e.uint(uint64(len(b.Listeners)))
	for _, l := range b.Listeners {
		e.str(l.Name)
		e.str(l.Host)
		e.int(int64(l.Port))
	}
	e.str(b.Rack)
	var flags byte
	if b.Fenced {
		flags |= 1
	}
	if b.InControlledShutdown {
		flags |= 2
	}
	e.b = append(e.b, flags)
}

func decodeBinaryRecord(p []byte) (Record, error) {
	if len(p) < 2 {
		return nil, errors.New("decode binary record: shorter than its header")
	}
	d := decoder{b: p[2:]}
	r := d.record(p[1])
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode binary record of type %d: %w", p[1], d.err)
	}
	return r, nil
}

// decoder reads a binary body; the first failure sticks in err and every
// later read returns zero values.
type decoder struct {
	b   []byte
	err error
	// slab backs the int32 lists of many partitions with few allocations
	// (a 100,000-partition topic would otherwise take 200,000).
	slab []int32
}

var errShort = errors.New("truncated")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) record(code byte) Record {
	switch code {
	case codeClusterID:
		return ClusterIDRecord{ClusterID: d.str()}
	case codeRegisterBroker:
		return RegisterBrokerRecord{Broker: d.broker()}
	case codeBrokerChange:
		return BrokerChangeRecord{BrokerID: d.int32(), BrokerEpoch: d.int(), Change: BrokerChange(d.byte())}
	case codeUnregisterBroker:
		return UnregisterBrokerRecord{BrokerID: d.int32(), BrokerEpoch: d.int()}
	case codeCreateTopic, codeCreateTopicELR, codeCreateTopicReassign:
		t := Topic{Name: d.str(), ID: d.uuid()}
		t.Partitions = d.partitions(codeLayout(code, codeCreateTopicELR, codeCreateTopicReassign))
		t.Configs = d.configs()
		return CreateTopicRecord{Topic: t}
	case codeDeleteTopic:
		return DeleteTopicRecord{ID: d.uuid()}
	case codeCreatePartitions, codeCreatePartitionsELR, codeCreatePartitionsReassign:
		return CreatePartitionsRecord{Topic: d.uuid(), Partitions: d.partitions(codeLayout(code, codeCreatePartitionsELR, codeCreatePartitionsReassign))}
	case codePartitionChange, codePartitionChangeELR, codePartitionChangeReassign:
		r := PartitionChangeRecord{Topic: d.uuid(), Partition: d.int32(), Leader: d.int32(),
			ISR: d.int32s(), Replicas: d.int32s(), LeaderEpoch: d.int32(), PartitionEpoch: d.int32()}
		if code != codePartitionChange {
			r.ELR, r.LastKnownELR = d.int32s(), d.int32s()
		}
		switch {
		case code == codePartitionChangeReassign:
			r.AddingReplicas, r.RemovingReplicas = d.int32s(), d.int32s()
			if r.AddingReplicas == nil && r.RemovingReplicas == nil {
				d.fail(errors.New("a partition change of the reassignment layout without reassignment fields"))
			}
		case code == codePartitionChangeELR && r.ELR == nil && r.LastKnownELR == nil:
			d.fail(errors.New("a partition change of the ELR layout without ELR fields"))
		}
		return r
	case codeConfig:
		r := ConfigRecord{Resource: ConfigResource(d.str()), Name: d.str(), Key: d.str()}
		switch d.byte() {
		case 0:
		case 1:
			v := d.str()
			r.Value = &v
		default:
			d.fail(errors.New("config value flag is neither 0 nor 1"))
		}
		return r
	case codeProducerIDs:
		return ProducerIDsRecord{First: d.int(), Count: d.int()}
	}
	d.fail(fmt.Errorf("unknown type %d", code))
	return nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(fmt.Errorf("%d is out of the int32 range", v))
		return 0
	}
	return int32(v)
}

// count reads a length and checks that the rest could hold that many
// elements of at least min bytes each, so a corrupt length cannot make the
// decoder allocate more than the input justifies.
func (d *decoder) count(min int) int {
	n := d.uint()
	if n > uint64(len(d.b)/min) {
		d.fail(fmt.Errorf("count %d is more than the %d bytes left could hold", n, len(d.b)))
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count(1)
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) uuid() (id [16]byte) {
	if len(d.b) < 16 {
		d.fail(errShort)
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[16:]
	return id
}

func (d *decoder) int32s() []int32 {
	n := d.uint()
	if n == 0 {
		return nil
	}
	n--
	if n == 0 {
		return []int32{}
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("count %d is more than the %d bytes left could hold", n, len(d.b)))
		return nil
	}
	if int(n) > cap(d.slab)-len(d.slab) {
		d.slab = make([]int32, 0, max(int(n), 4096))
	}
	start := len(d.slab)
	for i := uint64(0); i < n; i++ {
		d.slab = append(d.slab, d.int32())
	}
	// A full slice expression, so that an append to one list can never
	// write into the next.
	return d.slab[start:len(d.slab):len(d.slab)]
}

// codeLayout is the partition layout of a record type code.
func codeLayout(code, elr, reassign byte) partitionLayout {
	switch code {
	case elr:
		return layoutELR
	case reassign:
		return layoutReassign
	}
	return layoutBase
}

func (d *decoder) partitions(layout partitionLayout) []Partition {
	// A partition takes at least 6 bytes.
	n := d.count(6)
	ps := make([]Partition, n)
	for i := range ps {
		ps[i] = Partition{Index: d.int32(), Replicas: d.int32s(), ISR: d.int32s(),
			Leader: d.int32(), LeaderEpoch: d.int32(), PartitionEpoch: d.int32()}
		if layout != layoutBase {
			ps[i].ELR, ps[i].LastKnownELR = nilIfEmpty(d.int32s()), nilIfEmpty(d.int32s())
		}
		if layout == layoutReassign {
			ps[i].AddingReplicas, ps[i].RemovingReplicas = nilIfEmpty(d.int32s()), nilIfEmpty(d.int32s())
		}
	}
	// A layout larger than its partitions need is not canonical.
	if d.err == nil && layout != layoutBase && layoutOf(ps) != layout {
		if layout == layoutELR {
			d.fail(errors.New("partitions of the ELR layout without an ELR"))
		} else {
			d.fail(errors.New("partitions of the reassignment layout without a reassignment"))
		}
	}
	if d.err != nil {
		return nil
	}
	return ps
}

func (d *decoder) configs() map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	c := make(map[string]string, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		if _, dup := c[k]; dup {
			d.fail(fmt.Errorf("config %q twice", k))
		}
		c[k] = d.str()
	}
	return c
}

func (d *decoder) broker() Broker {
	b := Broker{ID: d.int32(), IncarnationID: d.uuid(), Epoch: d.int()}
	n := d.count(3)
	for i := 0; i < n && d.err == nil; i++ {
		b.Listeners = append(b.Listeners, Listener{Name: d.str(), Host: d.str(), Port: d.int32()})
	}
	b.Rack = d.str()
	flags := d.byte()
	if flags&^3 != 0 {
		d.fail(fmt.Errorf("broker flags %#x has unknown bits", flags))
	}
	b.Fenced, b.InControlledShutdown = flags&1 != 0, flags&2 != 0
	return normalizeBroker(b)
}
