package billing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// The capacity-unit sizes DynamoDB bills by.
const (
	WriteUnitBytes = 1024
	ReadUnitBytes  = 4096
)

// Reader is the un-instrumented client the meter makes its own reads with:
// the item as it was before a write (DynamoDB bills the larger of the old
// and the new item) and the tables' key schemas and indexes.
type Reader interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ Reader = (*dynamodb.Client)(nil)

// Classify names the kind of item a key belongs to ("host", "chunk", ...),
// so usage can be broken down by item kind. Nil puts every item under "".
type Classify func(table string, key map[string]types.AttributeValue) string

// Line is the usage of one operation on one kind of item.
type Line struct {
	Op       string `json:"op"`
	Kind     string `json:"kind"`
	Requests int    `json:"requests"`
	// Items counts the items read or written (a Query or a batch has many).
	Items int `json:"items"`
	// Failed counts writes refused by their condition (billed all the same).
	Failed int `json:"failed"`
	// ReadUnits and WriteUnits are billed on the table; IndexWriteUnits on
	// its global secondary indexes.
	ReadUnits       float64 `json:"readUnits"`
	WriteUnits      float64 `json:"writeUnits"`
	IndexWriteUnits float64 `json:"indexWriteUnits"`
	// Bytes is the item bytes the units were computed from.
	Bytes int64 `json:"bytes"`
}

// Usage is a snapshot of a meter.
type Usage struct {
	Lines []Line `json:"lines"`
	// SideReadErrors counts the meter's own reads that failed (the write
	// was then billed as if no old item existed).
	SideReadErrors int `json:"sideReadErrors,omitempty"`
	// HotKey is the partition key that took the most write units in one
	// second (by MeterOptions.Now), HotKeyWriteUnits those units: a key
	// takes at most 1,000 a second on DynamoDB
	// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html).
	HotKey           string  `json:"hotKey,omitempty"`
	HotKeyWriteUnits float64 `json:"hotKeyWriteUnits,omitempty"`
	// Throttled counts the attempts answered with a throttling error
	// (each retry its own); ThrottleFailures the requests that still
	// failed with one after the SDK's retries.
	Throttled        int `json:"throttled,omitempty"`
	ThrottleFailures int `json:"throttleFailures,omitempty"`
}

// Total sums the lines.
func (u Usage) Total() Line {
	var t Line
	for _, l := range u.Lines {
		t.Requests += l.Requests
		t.Items += l.Items
		t.Failed += l.Failed
		t.ReadUnits += l.ReadUnits
		t.WriteUnits += l.WriteUnits
		t.IndexWriteUnits += l.IndexWriteUnits
		t.Bytes += l.Bytes
	}
	return t
}

// Meter applies DynamoDB's billing rules to every request of the clients it
// is added to. It is safe for concurrent use.
type Meter struct {
	raw      Reader
	classify Classify
	opts     MeterOptions

	mu        sync.Mutex
	schemas   map[string]*schema
	lines     map[[2]string]*Line
	sideErrs  int
	sideReads int
	known     map[string]map[string]types.AttributeValue // table+key -> item (nil: absent)

	// keySecond holds each partition key's write units in the second it
	// last wrote in; hot is the most any key took in one second.
	keySecond         map[string]keyUnits
	hot               keyUnits
	hotKey            string
	throttled, failed int
}

// keyUnits is a partition key's write units in one second.
type keyUnits struct {
	sec   int64
	units float64
}

// MeterOptions choose how the meter learns the old item of a write.
type MeterOptions struct {
	// Remember keeps the last version of every item the meter has seen
	// (written, read, or read on the side) and reads on the side only the
	// items it has not seen. It is exact when every writer of the table
	// goes through metered clients, and spares the server one read per
	// write.
	Remember bool
	// FreshTables, with Remember, takes an item never seen as absent: the
	// tables were empty when metering began, so no side read is made.
	FreshTables bool
	// Now is the clock the write units a second of each partition key are
	// counted on; nil: time.Now.
	Now func() time.Time
	// QueryKinds names a table Query's line by the kind of the first item
	// it returned ("query <kind>"), so a query of items of one kind is
	// told from the others; unset (or no item), its line is "query "
	// plus the index's name.
	QueryKinds bool
}

// NewMeter returns a meter that reads every old item on the side through
// raw, which must not carry the meter itself.
func NewMeter(raw Reader, classify Classify) *Meter {
	return NewMeterWith(raw, classify, MeterOptions{})
}

// NewMeterWith is NewMeter with options.
func NewMeterWith(raw Reader, classify Classify, opts MeterOptions) *Meter {
	if classify == nil {
		classify = func(string, map[string]types.AttributeValue) string { return "" }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Meter{raw: raw, classify: classify, opts: opts, schemas: map[string]*schema{}, lines: map[[2]string]*Line{}, known: map[string]map[string]types.AttributeValue{}, keySecond: map[string]keyUnits{}}
}

// SideReads counts the reads the meter made on its own.
func (m *Meter) SideReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sideReads
}

// keyString identifies an item of a table by its key attributes.
func keyString(table string, key map[string]types.AttributeValue) string {
	names := slices.Sorted(maps.Keys(key))
	var b strings.Builder
	b.WriteString(table)
	for _, n := range names {
		b.WriteString("\x00")
		b.WriteString(n)
		b.WriteString("=")
		switch v := key[n].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("B:" + string(v.Value))
		}
	}
	return b.String()
}

// remember records an item's current version (nil: absent).
func (m *Meter) remember(table string, key, item map[string]types.AttributeValue) {
	if !m.opts.Remember {
		return
	}
	m.mu.Lock()
	m.known[keyString(table, key)] = item
	m.mu.Unlock()
}

// Option adds the meter to a DynamoDB client:
// dynamodb.NewFromConfig(cfg, meter.Option).
func (m *Meter) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("BillingMeter", m.handle), middleware.After); err != nil {
			return err
		}
		// Below the retry loop: every attempt's answer.
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("BillingThrottles", m.attempt), middleware.After)
	})
}

// attempt counts an attempt answered with a throttling error.
func (m *Meter) attempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if isThrottle(err) {
		m.mu.Lock()
		m.throttled++
		m.mu.Unlock()
	}
	return out, md, err
}

// isThrottle tells whether err is DynamoDB's answer to a key, a table or
// the account past its throughput.
func isThrottle(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}

// wrote counts units written on the partition key of key now.
func (m *Meter) wrote(s *schema, key map[string]types.AttributeValue, units float64) {
	pk := ""
	if v, ok := key[s.hash].(*types.AttributeValueMemberS); ok {
		pk = v.Value
	} else if key[s.hash] != nil {
		pk = fmt.Sprint(key[s.hash])
	}
	sec := m.opts.Now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keySecond[pk]
	if k.sec != sec {
		k = keyUnits{sec: sec}
	}
	k.units += units
	m.keySecond[pk] = k
	if k.units > m.hot.units {
		m.hot, m.hotKey = k, pk
	}
}

// Usage returns the usage so far, lines sorted by operation and kind.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := Usage{SideReadErrors: m.sideErrs, HotKey: m.hotKey, HotKeyWriteUnits: m.hot.units, Throttled: m.throttled, ThrottleFailures: m.failed}
	for _, k := range slices.SortedFunc(maps.Keys(m.lines), func(a, b [2]string) int {
		if a[0] != b[0] {
			return cmpString(a[0], b[0])
		}
		return cmpString(a[1], b[1])
	}) {
		u.Lines = append(u.Lines, *m.lines[k])
	}
	return u
}

// Reset clears the usage.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.lines)
	clear(m.keySecond)
	m.sideErrs, m.throttled, m.failed = 0, 0, 0
	m.hot, m.hotKey = keyUnits{}, ""
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *Meter) add(op, kind string, f func(l *Line)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{op, kind}
	l := m.lines[k]
	if l == nil {
		l = &Line{Op: op, Kind: kind}
		m.lines[k] = l
	}
	f(l)
}

// schema is what billing needs of a table.
type schema struct {
	hash, rng string
	indexes   []index
}

type index struct {
	name, hash, rng string
	projection      types.ProjectionType
	include         []string
}

func (m *Meter) schema(ctx context.Context, table string) (*schema, error) {
	m.mu.Lock()
	s := m.schemas[table]
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	out, err := m.raw.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return nil, fmt.Errorf("billing: describe table %s: %w", table, err)
	}
	s = &schema{}
	s.hash, s.rng = keyNames(out.Table.KeySchema)
	for _, g := range out.Table.GlobalSecondaryIndexes {
		ix := index{name: aws.ToString(g.IndexName)}
		ix.hash, ix.rng = keyNames(g.KeySchema)
		if g.Projection != nil {
			ix.projection = g.Projection.ProjectionType
			ix.include = g.Projection.NonKeyAttributes
		}
		s.indexes = append(s.indexes, ix)
	}
	m.mu.Lock()
	m.schemas[table] = s
	m.mu.Unlock()
	return s, nil
}

func keyNames(ks []types.KeySchemaElement) (hash, rng string) {
	for _, k := range ks {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	return hash, rng
}

func (s *schema) key(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{}
	if v, ok := item[s.hash]; ok {
		k[s.hash] = v
	}
	if s.rng != "" {
		if v, ok := item[s.rng]; ok {
			k[s.rng] = v
		}
	}
	return k
}

// entry returns an item's entry in index ix, nil when the item is not in it
// (a sparse index holds only items with all its key attributes).
func (s *schema) entry(ix index, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil || item[ix.hash] == nil || ix.rng != "" && item[ix.rng] == nil {
		return nil
	}
	if ix.projection == types.ProjectionTypeAll {
		return item
	}
	e := s.key(item)
	e[ix.hash] = item[ix.hash]
	if ix.rng != "" {
		e[ix.rng] = item[ix.rng]
	}
	if ix.projection == types.ProjectionTypeInclude {
		for _, a := range ix.include {
			if v, ok := item[a]; ok {
				e[a] = v
			}
		}
	}
	return e
}

// WriteUnits is what one successful write costs on the table: the larger of
// the old and new item, in 1 KB units, at least 1. Either may be nil.
func WriteUnits(oldSize, newSize int) float64 {
	return float64(max(1, ceilDiv(max(oldSize, newSize), WriteUnitBytes)))
}

// ReadUnits is what reading size bytes costs: 4 KB units, at least 1, half
// for an eventually consistent read.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, ceilDiv(size, ReadUnitBytes)))
	if !consistent {
		u /= 2
	}
	return u
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// indexWriteUnits applies the GSI rules to a successful write from old to
// new (either nil): an entry appearing costs a put, one disappearing a
// delete, a changed index key both, a changed projection one write.
func (s *schema) indexWriteUnits(old, new map[string]types.AttributeValue) float64 {
	var u float64
	for _, ix := range s.indexes {
		oe, ne := s.entry(ix, old), s.entry(ix, new)
		switch {
		case oe == nil && ne == nil:
		case oe == nil:
			u += WriteUnits(0, ItemSize(ne))
		case ne == nil:
			u += WriteUnits(ItemSize(oe), 0)
		case !reflect.DeepEqual(oe[ix.hash], ne[ix.hash]) || ix.rng != "" && !reflect.DeepEqual(oe[ix.rng], ne[ix.rng]):
			u += WriteUnits(ItemSize(oe), 0) + WriteUnits(0, ItemSize(ne))
		case !reflect.DeepEqual(oe, ne):
			u += WriteUnits(0, ItemSize(ne))
		}
	}
	return u
}

// IndexWriteUnits is the GSI cost of a successful write of a table with
// the given global secondary indexes; exported for tests and estimates.
func IndexWriteUnits(hashKey, rangeKey string, gsis []types.GlobalSecondaryIndexDescription, old, new map[string]types.AttributeValue) float64 {
	s := &schema{hash: hashKey, rng: rangeKey}
	for _, g := range gsis {
		ix := index{name: aws.ToString(g.IndexName)}
		ix.hash, ix.rng = keyNames(g.KeySchema)
		if g.Projection != nil {
			ix.projection, ix.include = g.Projection.ProjectionType, g.Projection.NonKeyAttributes
		}
		s.indexes = append(s.indexes, ix)
	}
	return s.indexWriteUnits(old, new)
}

// current returns an item as it is before a write: remembered, or read on
// the side; nil when absent.
func (m *Meter) current(ctx context.Context, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if m.opts.Remember {
		m.mu.Lock()
		it, ok := m.known[keyString(table, key)]
		m.mu.Unlock()
		if ok || m.opts.FreshTables {
			return it
		}
	}
	return m.read(ctx, table, key)
}

// read reads an item as it is now (consistently), nil when absent.
func (m *Meter) read(ctx context.Context, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	m.mu.Lock()
	m.sideReads++
	m.mu.Unlock()
	out, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		m.mu.Lock()
		m.sideErrs++
		m.mu.Unlock()
		return nil
	}
	if len(out.Item) == 0 {
		m.remember(table, key, nil)
		return nil
	}
	m.remember(table, key, out.Item)
	return out.Item
}

func isConditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// write bills one write of table from old to new. failed means its
// condition refused it: the larger item is billed, the indexes are not.
func (m *Meter) write(op, table string, s *schema, key, old, new map[string]types.AttributeValue, failed bool, factor float64) {
	kind := m.classify(table, key)
	os, ns := 0, 0
	if old != nil {
		os = ItemSize(old)
	}
	if new != nil {
		ns = ItemSize(new)
	}
	m.wrote(s, key, factor*WriteUnits(os, ns))
	m.add(op, kind, func(l *Line) {
		l.Items++
		l.WriteUnits += factor * WriteUnits(os, ns)
		l.Bytes += int64(max(os, ns))
		if failed {
			l.Failed++
			return
		}
		l.IndexWriteUnits += s.indexWriteUnits(old, new)
	})
	if !failed {
		m.remember(table, key, new)
	}
}

func (m *Meter) request(op, kind string) {
	m.add(op, kind, func(l *Line) { l.Requests++ })
}

// handle bills a request, and counts one that failed throttled after
// every retry.
func (m *Meter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := m.bill(ctx, in, next)
	if isThrottle(err) {
		m.mu.Lock()
		m.failed++
		m.mu.Unlock()
	}
	return out, md, err
}

func (m *Meter) bill(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		table := aws.ToString(p.TableName)
		s, err := m.schema(ctx, table)
		if err != nil {
			return next.HandleInitialize(ctx, in)
		}
		key := s.key(p.Item)
		var old map[string]types.AttributeValue
		if p.ReturnValues != types.ReturnValueAllOld {
			old = m.current(ctx, table, key)
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil && !isConditionFailed(err) {
			return out, md, err
		}
		if r, ok := out.Result.(*dynamodb.PutItemOutput); ok && p.ReturnValues == types.ReturnValueAllOld && err == nil {
			old = r.Attributes
		}
		m.request("PutItem", m.classify(table, key))
		m.write("PutItem", table, s, key, old, p.Item, err != nil, 1)
		return out, md, err

	case *dynamodb.DeleteItemInput:
		table := aws.ToString(p.TableName)
		s, err := m.schema(ctx, table)
		if err != nil {
			return next.HandleInitialize(ctx, in)
		}
		var old map[string]types.AttributeValue
		if p.ReturnValues != types.ReturnValueAllOld {
			old = m.current(ctx, table, p.Key)
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil && !isConditionFailed(err) {
			return out, md, err
		}
		if r, ok := out.Result.(*dynamodb.DeleteItemOutput); ok && p.ReturnValues == types.ReturnValueAllOld && err == nil {
			old = r.Attributes
		}
		m.request("DeleteItem", m.classify(table, p.Key))
		m.write("DeleteItem", table, s, p.Key, old, nil, err != nil, 1)
		return out, md, err

	case *dynamodb.UpdateItemInput:
		table := aws.ToString(p.TableName)
		s, err := m.schema(ctx, table)
		if err != nil {
			return next.HandleInitialize(ctx, in)
		}
		old := m.current(ctx, table, p.Key)
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil && !isConditionFailed(err) {
			return out, md, err
		}
		new := old
		if err == nil {
			new = m.read(ctx, table, p.Key)
		}
		m.request("UpdateItem", m.classify(table, p.Key))
		m.write("UpdateItem", table, s, p.Key, old, new, err != nil, 1)
		return out, md, err

	case *dynamodb.GetItemInput:
		table := aws.ToString(p.TableName)
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		item := map[string]types.AttributeValue(nil)
		if r, ok := out.Result.(*dynamodb.GetItemOutput); ok {
			item = r.Item
		}
		if p.ProjectionExpression != nil && len(item) > 0 {
			// A projection does not lower the bill: the whole item is read.
			item = m.read(ctx, table, p.Key)
		} else if len(item) > 0 {
			m.remember(table, p.Key, item)
		}
		kind := m.classify(table, p.Key)
		m.request("GetItem", kind)
		m.add("GetItem", kind, func(l *Line) {
			if len(item) > 0 {
				l.Items++
			}
			l.ReadUnits += ReadUnits(ItemSize(item), aws.ToBool(p.ConsistentRead))
			l.Bytes += int64(ItemSize(item))
		})
		return out, md, err

	case *dynamodb.QueryInput:
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		size, n := 0, 0
		if r, ok := out.Result.(*dynamodb.QueryOutput); ok {
			for _, it := range r.Items {
				size += ItemSize(it)
			}
			n = len(r.Items)
		}
		// Items of a query are summed before rounding to 4 KB.
		kind := "query " + aws.ToString(p.IndexName)
		if r, ok := out.Result.(*dynamodb.QueryOutput); ok && m.opts.QueryKinds && p.IndexName == nil && len(r.Items) > 0 {
			if s, err := m.schema(ctx, aws.ToString(p.TableName)); err == nil {
				kind = "query " + m.classify(aws.ToString(p.TableName), s.key(r.Items[0]))
			}
		}
		m.request("Query", kind)
		m.add("Query", kind, func(l *Line) {
			l.Items += n
			l.ReadUnits += ReadUnits(size, aws.ToBool(p.ConsistentRead))
			l.Bytes += int64(size)
		})
		return out, md, err

	case *dynamodb.BatchGetItemInput:
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		if r, ok := out.Result.(*dynamodb.BatchGetItemOutput); ok {
			for table, items := range r.Responses {
				consistent := p.RequestItems[table].ConsistentRead
				for _, it := range items {
					s, serr := m.schema(ctx, table)
					kind := ""
					if serr == nil {
						kind = m.classify(table, s.key(it))
					}
					m.add("BatchGetItem", kind, func(l *Line) {
						l.Items++
						l.ReadUnits += ReadUnits(ItemSize(it), aws.ToBool(consistent))
						l.Bytes += int64(ItemSize(it))
					})
				}
			}
		}
		m.request("BatchGetItem", "")
		return out, md, err

	case *dynamodb.BatchWriteItemInput:
		type w struct {
			table    string
			s        *schema
			key, old map[string]types.AttributeValue
			new      map[string]types.AttributeValue
		}
		var ws []w
		for table, reqs := range p.RequestItems {
			s, err := m.schema(ctx, table)
			if err != nil {
				continue
			}
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					key := s.key(r.PutRequest.Item)
					ws = append(ws, w{table, s, key, m.current(ctx, table, key), r.PutRequest.Item})
				case r.DeleteRequest != nil:
					ws = append(ws, w{table, s, r.DeleteRequest.Key, m.current(ctx, table, r.DeleteRequest.Key), nil})
				}
			}
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		// Unprocessed items are not billed; they come back in a later call.
		unprocessed := 0
		if r, ok := out.Result.(*dynamodb.BatchWriteItemOutput); ok {
			for _, rs := range r.UnprocessedItems {
				unprocessed += len(rs)
			}
		}
		for _, x := range ws[:len(ws)-min(unprocessed, len(ws))] {
			m.write("BatchWriteItem", x.table, x.s, x.key, x.old, x.new, false, 1)
		}
		m.request("BatchWriteItem", "")
		return out, md, err

	case *dynamodb.TransactWriteItemsInput:
		type w struct {
			op, table string
			s         *schema
			key, old  map[string]types.AttributeValue
			new       map[string]types.AttributeValue
		}
		var ws []w
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				table := aws.ToString(it.Put.TableName)
				if s, err := m.schema(ctx, table); err == nil {
					key := s.key(it.Put.Item)
					ws = append(ws, w{"Put", table, s, key, m.current(ctx, table, key), it.Put.Item})
				}
			case it.Delete != nil:
				table := aws.ToString(it.Delete.TableName)
				if s, err := m.schema(ctx, table); err == nil {
					ws = append(ws, w{"Delete", table, s, it.Delete.Key, m.current(ctx, table, it.Delete.Key), nil})
				}
			case it.Update != nil:
				table := aws.ToString(it.Update.TableName)
				if s, err := m.schema(ctx, table); err == nil {
					old := m.current(ctx, table, it.Update.Key)
					ws = append(ws, w{"Update", table, s, it.Update.Key, old, old})
				}
			case it.ConditionCheck != nil:
				table := aws.ToString(it.ConditionCheck.TableName)
				if s, err := m.schema(ctx, table); err == nil {
					old := m.current(ctx, table, it.ConditionCheck.Key)
					ws = append(ws, w{"ConditionCheck", table, s, it.ConditionCheck.Key, old, old})
				}
			}
		}
		out, md, err := next.HandleInitialize(ctx, in)
		var tc *types.TransactionCanceledException
		if err != nil && !errors.As(err, &tc) {
			return out, md, err
		}
		for i, x := range ws {
			if x.op == "Update" && err == nil {
				ws[i].new = m.read(ctx, x.table, x.key)
			}
		}
		// Transactional writes cost twice the standard units, whether they
		// succeed or are cancelled.
		for _, x := range ws {
			new := x.new
			if err != nil {
				new = x.old
			}
			m.write("TransactWriteItems", x.table, x.s, x.key, x.old, new, err != nil, 2)
		}
		m.request("TransactWriteItems", "")
		return out, md, err

	case *dynamodb.TransactGetItemsInput:
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		if r, ok := out.Result.(*dynamodb.TransactGetItemsOutput); ok {
			for _, resp := range r.Responses {
				m.add("TransactGetItems", "", func(l *Line) {
					l.Items++
					l.ReadUnits += 2 * ReadUnits(ItemSize(resp.Item), true)
					l.Bytes += int64(ItemSize(resp.Item))
				})
			}
		}
		m.request("TransactGetItems", "")
		return out, md, err
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if op := awsmiddleware.GetOperationName(ctx); op != "" {
		m.request(op, "")
	}
	return out, md, err
}
