package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// Options shape one local deployment of the template.
type Options struct {
	// Prefix starts the name of every table and queue created
	// ("<Prefix>-<LogicalId>"), so deployments on one moto server do not
	// collide. Required: letters, digits, '-' and '_', at most 40.
	Prefix string
	// Stage is the template's Stage parameter, which names the SSM
	// parameter path. Empty means Prefix, lowercased and with other
	// characters made '-', so each deployment has its own parameters.
	Stage string
	// ShardCount is the template's ShardCount parameter; 0 keeps its
	// default.
	ShardCount int
	// TemplateParams override other template parameters by name (e.g.
	// "IngestBatchSize": "10"). Stage and ShardCount above win over it.
	TemplateParams map[string]string
	// ParamOverrides are runtime (SSM) parameters to set, by name without
	// the path (e.g. "CheckHostPeriod": "2s"), as an operator would: they
	// are the only parameters written. The rest are unset, as in a fresh
	// deployment, and the functions use the code's defaults.
	ParamOverrides map[string]string
}

// Stack is a deployed template: the names of what was created and what the
// template says about the functions.
type Stack struct {
	Prefix string
	Stage  string

	TableName      string
	InputQueueURL  string
	InputDLQURL    string
	OutputQueueURL string
	// BodyBucket is the bucket of bodies larger than InlineBodyBytes.
	BodyBucket string
	// ParamPath is the functions' PARAM_PATH, e.g. "/urldownloader/dev/".
	ParamPath  string
	ShardCount int

	// Parameters holds every template parameter's resolved value.
	Parameters map[string]string
	// Params holds the runtime parameters in force, by name without the
	// path: the code's defaults (params.Defaults) with ParamOverrides,
	// the only ones written to SSM, over them.
	Params map[string]string
	// Functions holds each function (AWS::Serverless::Function, which
	// the translator makes an AWS::Lambda::Function) by logical id.
	Functions map[string]Function
	// IngestEventSource is IngestFunction's SQS trigger.
	IngestEventSource EventSourceMapping
	// WakeEventSource is CheckFunction's SQS trigger (the wake queue);
	// QueueURL is empty when the template has none.
	WakeEventSource EventSourceMapping
	// Schedules are the enabled schedules that invoke a function, in
	// template order (one per shard below ShardCount for CheckFunction).
	Schedules []Schedule
	// Resources holds every created resource by logical id.
	Resources map[string]Resource
}

// Resource is one created resource.
type Resource struct {
	Type string
	// Ref is what CloudFormation's Ref returns: a table or parameter
	// name, a queue URL.
	Ref string
	// Arn is empty for types that have none.
	Arn string
}

// Function is what the template declares about one function, with
// Globals applied (by the translator).
type Function struct {
	// Env is the function's environment, resolved to the created resources.
	Env        map[string]string
	Timeout    time.Duration
	MemorySize int
	// EphemeralStorageMB is the size of the function's /tmp in MiB
	// (EphemeralStorage.Size; Lambda's default 512).
	EphemeralStorageMB int
}

// EventSourceMapping is an SQS event of a function, as Lambda's event
// source mapping would run it.
type EventSourceMapping struct {
	Function string
	QueueURL string
	// BatchSize is the most records per invocation (Lambda's default for
	// SQS is 10).
	BatchSize int
	// MaximumBatchingWindowInSeconds is how long records are gathered
	// before an invocation with fewer than BatchSize.
	MaximumBatchingWindowInSeconds int
	// ReportBatchItemFailures: the function may fail single records.
	ReportBatchItemFailures bool
	// MaxReceiveCount is from the queue's RedrivePolicy: a record received
	// this many times goes to DLQURL on the next receive. 0: no DLQ.
	MaxReceiveCount int
	DLQURL          string
	// MaximumConcurrency is ScalingConfig's: the most invocations the
	// mapping runs at once (0: unset, Lambda scales to its own limit).
	MaximumConcurrency int
}

// Schedule is an enabled EventBridge rule that invokes a function.
type Schedule struct {
	Rule     string
	Function string
	// Expression is the ScheduleExpression, e.g. "rate(1 minute)".
	Expression string
	// Every is the period of a rate() expression; 0 for cron().
	Every time.Duration
	// Input is the constant event JSON the target is invoked with.
	Input string
}

// Env returns the environment variables of the functions (Globals and
// each function's own, e.g. CHECK_RUN_SECONDS), resolved to the created
// resources.
func (s *Stack) Env() map[string]string {
	out := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(s.Functions)) {
		maps.Copy(out, s.Functions[id].Env)
	}
	return out
}

var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Deploy creates the template's DynamoDB tables and SQS queues (dead-letter
// queues first) through cfg, puts opts.ParamOverrides under the functions'
// parameter path, and resolves the functions' settings. Creating what
// already exists with the same prefix is not an error: queues get the
// template's attributes again, parameters are overwritten, so a rerun
// against a long-lived server works.
func (t *Template) Deploy(ctx context.Context, cfg aws.Config, opts Options) (*Stack, error) {
	if !validPrefix.MatchString(opts.Prefix) {
		return nil, fmt.Errorf("deploy: prefix %q: want 1 to 40 letters, digits, '-' or '_'", opts.Prefix)
	}
	overrides := maps.Clone(opts.TemplateParams)
	if overrides == nil {
		overrides = map[string]string{}
	}
	stage := opts.Stage
	if stage == "" {
		stage = stageFromPrefix(opts.Prefix)
	}
	if _, ok := t.params["Stage"]; ok {
		overrides["Stage"] = stage
	}
	if opts.ShardCount != 0 {
		overrides["ShardCount"] = strconv.Itoa(opts.ShardCount)
	}
	params, err := t.resolveParams(overrides)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", opts.Prefix, err)
	}
	d := &deployer{
		t:    t,
		opts: opts,
		ev:   &evaluator{t: t, params: params, created: map[string]physical{}, stackName: opts.Prefix},
		db:   dynamodb.NewFromConfig(cfg),
		sqs:  sqs.NewFromConfig(cfg),
		ssm:  ssm.NewFromConfig(cfg),
		s3:   NewS3(cfg),
		st: &Stack{
			Prefix: opts.Prefix, Stage: stage, Parameters: params,
			Params: map[string]string{}, Functions: map[string]Function{}, Resources: map[string]Resource{},
		},
	}
	if err := d.run(ctx); err != nil {
		return nil, fmt.Errorf("deploy %s: %w", opts.Prefix, err)
	}
	return d.st, nil
}

// stageFromPrefix makes a prefix fit Stage's pattern [a-z0-9-]+.
func stageFromPrefix(prefix string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, prefix)
}

type deployer struct {
	t    *Template
	opts Options
	ev   *evaluator
	db   *dynamodb.Client
	sqs  *sqs.Client
	ssm  *ssm.Client
	s3   *s3.Client
	st   *Stack
}

// creatable are the resource types Deploy makes; the others (functions,
// the API, schedules, IAM, log groups, alarms, the dashboard) are the local
// pipeline's business or have no local meaning.
var creatable = map[string]bool{
	"AWS::DynamoDB::Table": true,
	"AWS::SQS::Queue":      true,
	"AWS::S3::Bucket":      true,
}

// refused are resource types the template must not declare, with why.
var refused = map[string]string{
	// A deploy that touched such a resource would reset the value an
	// operator set live; the code holds the defaults instead.
	"AWS::SSM::Parameter": "runtime parameter values belong to operators, not to the stack (defaults live in shared/domain/params)",
}

func (d *deployer) run(ctx context.Context) error {
	order, err := d.createOrder()
	if err != nil {
		return err
	}
	for _, id := range order {
		r := d.t.resources[id]
		var p physical
		var err error
		switch r.Type {
		case "AWS::DynamoDB::Table":
			p, err = d.createTable(ctx, r)
		case "AWS::SQS::Queue":
			p, err = d.createQueue(ctx, r)
		case "AWS::S3::Bucket":
			p, err = d.createBucket(ctx, r)
		}
		if err != nil {
			return err
		}
		d.ev.created[id] = p
		d.st.Resources[id] = Resource{Type: p.Type, Ref: p.Ref, Arn: p.Attrs["Arn"]}
	}
	if err := d.putParams(ctx); err != nil {
		return err
	}
	return d.describe()
}

// createOrder returns the enabled creatable resources, each after those it
// refers to, otherwise in file order.
func (d *deployer) createOrder() ([]string, error) {
	var ids []string
	for _, id := range d.t.order {
		r := d.t.resources[id]
		if why, ok := refused[r.Type]; ok {
			return nil, fmt.Errorf("%s (%s): %s", id, r.Type, why)
		}
		if !creatable[r.Type] {
			continue
		}
		if on, err := d.enabled(id); err != nil {
			return nil, err
		} else if !on {
			continue
		}
		ids = append(ids, id)
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(id string) error
	visit = func(id string) error {
		switch state[id] {
		case 1:
			return fmt.Errorf("resources refer to each other in a cycle through %s", id)
		case 2:
			return nil
		}
		state[id] = 1
		r := d.t.resources[id]
		for _, dep := range append(d.t.refs(r.Properties), r.DependsOn...) {
			if slices.Contains(ids, dep) {
				if err := visit(dep); err != nil {
					return err
				}
			}
		}
		state[id] = 2
		order = append(order, id)
		return nil
	}
	for _, id := range ids {
		if err := visit(id); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// decode evaluates a resource's properties and decodes them into dst, a
// struct that names every property this package handles: an unknown one
// is an error, so a template change cannot be silently ignored locally.
func (d *deployer) decode(r resource, dst any) error {
	props, err := d.ev.eval(r.Properties)
	if err != nil {
		return fmt.Errorf("%s: %w", r.ID, err)
	}
	data, err := json.Marshal(props)
	if err != nil {
		return fmt.Errorf("%s: %w", r.ID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%s (%s): %w; teach internal/stack the property or drop it", r.ID, r.Type, err)
	}
	return nil
}

func (d *deployer) physicalName(id string) string { return d.opts.Prefix + "-" + id }

// num is a number that CloudFormation may give as a YAML number or as a
// string (every Ref to a Number parameter is a string).
type num int64

func (n *num) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number, got %s", b)
	}
	*n = num(v)
	return nil
}

// flag is a boolean given as true or "true".
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseBool(strings.Trim(string(b), `"`))
	if err != nil {
		return fmt.Errorf("want true or false, got %s", b)
	}
	*f = flag(v)
	return nil
}

type cfnKey struct {
	AttributeName string
	KeyType       dt.KeyType
}

type cfnProjection struct {
	ProjectionType   dt.ProjectionType
	NonKeyAttributes []string
}

type cfnIndex struct {
	IndexName  string
	KeySchema  []cfnKey
	Projection cfnProjection
}

type cfnTable struct {
	BillingMode          dt.BillingMode
	AttributeDefinitions []struct {
		AttributeName string
		AttributeType dt.ScalarAttributeType
	}
	KeySchema               []cfnKey
	GlobalSecondaryIndexes  []cfnIndex
	LocalSecondaryIndexes   []cfnIndex
	TimeToLiveSpecification *struct {
		AttributeName string
		Enabled       flag
	}
	PointInTimeRecoverySpecification *struct {
		PointInTimeRecoveryEnabled flag
		RecoveryPeriodInDays       num
	}
	SSESpecification *struct {
		SSEEnabled     flag
		SSEType        string
		KMSMasterKeyId string
	}
	// Accepted and ignored: no local meaning.
	TableName                 json.RawMessage // names are always <Prefix>-<LogicalId>
	Tags                      json.RawMessage
	DeletionProtectionEnabled json.RawMessage
}

func (d *deployer) createTable(ctx context.Context, r resource) (physical, error) {
	var c cfnTable
	if err := d.decode(r, &c); err != nil {
		return physical{}, err
	}
	name := d.physicalName(r.ID)
	in := &dynamodb.CreateTableInput{TableName: &name, BillingMode: c.BillingMode}
	if in.BillingMode == "" || in.BillingMode == dt.BillingModeProvisioned {
		// Capacity means nothing on moto; PAY_PER_REQUEST needs none.
		in.BillingMode = dt.BillingModePayPerRequest
	}
	for _, a := range c.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, dt.AttributeDefinition{AttributeName: aws.String(a.AttributeName), AttributeType: a.AttributeType})
	}
	in.KeySchema = keySchema(c.KeySchema)
	for _, g := range c.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, dt.GlobalSecondaryIndex{
			IndexName: aws.String(g.IndexName), KeySchema: keySchema(g.KeySchema), Projection: projection(g.Projection),
		})
	}
	for _, l := range c.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, dt.LocalSecondaryIndex{
			IndexName: aws.String(l.IndexName), KeySchema: keySchema(l.KeySchema), Projection: projection(l.Projection),
		})
	}
	if c.SSESpecification != nil {
		in.SSESpecification = &dt.SSESpecification{Enabled: aws.Bool(bool(c.SSESpecification.SSEEnabled))}
	}
	out, err := d.db.CreateTable(ctx, in)
	var arn string
	var inUse *dt.ResourceInUseException
	switch {
	case err == nil:
		arn = aws.ToString(out.TableDescription.TableArn)
	case errors.As(err, &inUse):
		// A rerun with the same prefix: keep the table and its items.
		desc, err := d.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil {
			return physical{}, fmt.Errorf("describe existing table %s: %w", name, err)
		}
		arn = aws.ToString(desc.Table.TableArn)
	default:
		return physical{}, fmt.Errorf("create table %s: %w", name, err)
	}
	if ttl := c.TimeToLiveSpecification; ttl != nil && ttl.Enabled {
		if _, err := d.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               &name,
			TimeToLiveSpecification: &dt.TimeToLiveSpecification{AttributeName: aws.String(ttl.AttributeName), Enabled: aws.Bool(true)},
		}); err != nil {
			return physical{}, fmt.Errorf("enable TTL on %s: %w", name, err)
		}
	}
	if pitr := c.PointInTimeRecoverySpecification; pitr != nil && pitr.PointInTimeRecoveryEnabled {
		if _, err := d.db.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        &name,
			PointInTimeRecoverySpecification: &dt.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		}); err != nil {
			return physical{}, fmt.Errorf("enable point-in-time recovery on %s: %w", name, err)
		}
	}
	return physical{Type: r.Type, Ref: name, Attrs: map[string]string{"Arn": arn}}, nil
}

func keySchema(ks []cfnKey) []dt.KeySchemaElement {
	out := make([]dt.KeySchemaElement, len(ks))
	for i, k := range ks {
		out[i] = dt.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: k.KeyType}
	}
	return out
}

func projection(p cfnProjection) *dt.Projection {
	return &dt.Projection{ProjectionType: p.ProjectionType, NonKeyAttributes: p.NonKeyAttributes}
}

type cfnQueue struct {
	DelaySeconds                  *num
	MaximumMessageSize            *num
	MessageRetentionPeriod        *num
	ReceiveMessageWaitTimeSeconds *num
	VisibilityTimeout             *num
	SqsManagedSseEnabled          *flag
	FifoQueue                     *flag
	ContentBasedDeduplication     *flag
	RedrivePolicy                 *struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     num    `json:"maxReceiveCount"`
	}
	// Accepted and ignored: no local meaning.
	QueueName                    json.RawMessage // names are always <Prefix>-<LogicalId>
	KmsMasterKeyId               json.RawMessage
	KmsDataKeyReusePeriodSeconds json.RawMessage
	Tags                         json.RawMessage
}

func (d *deployer) createQueue(ctx context.Context, r resource) (physical, error) {
	var c cfnQueue
	if err := d.decode(r, &c); err != nil {
		return physical{}, err
	}
	name := d.physicalName(r.ID)
	attrs := map[string]string{}
	for key, v := range map[string]*num{
		"DelaySeconds": c.DelaySeconds, "MaximumMessageSize": c.MaximumMessageSize,
		"MessageRetentionPeriod": c.MessageRetentionPeriod, "ReceiveMessageWaitTimeSeconds": c.ReceiveMessageWaitTimeSeconds,
		"VisibilityTimeout": c.VisibilityTimeout,
	} {
		if v != nil {
			attrs[key] = strconv.FormatInt(int64(*v), 10)
		}
	}
	for key, v := range map[string]*flag{
		"SqsManagedSseEnabled": c.SqsManagedSseEnabled, "FifoQueue": c.FifoQueue, "ContentBasedDeduplication": c.ContentBasedDeduplication,
	} {
		if v != nil {
			attrs[key] = strconv.FormatBool(bool(*v))
		}
	}
	if c.FifoQueue != nil && *c.FifoQueue {
		name += ".fifo"
	}
	if c.RedrivePolicy != nil {
		// SQS wants the policy as a JSON string, maxReceiveCount a number.
		b, err := json.Marshal(c.RedrivePolicy)
		if err != nil {
			return physical{}, fmt.Errorf("%s: redrive policy: %w", r.ID, err)
		}
		attrs["RedrivePolicy"] = string(b)
	}
	var url string
	out, err := d.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	var exists *sqstypes.QueueNameExists
	switch {
	case err == nil:
		url = aws.ToString(out.QueueUrl)
	case errors.As(err, &exists):
		// A rerun with other attributes: bring the queue to the template's.
		got, err := d.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if err != nil {
			return physical{}, fmt.Errorf("find existing queue %s: %w", name, err)
		}
		url = aws.ToString(got.QueueUrl)
		if _, err := d.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: attrs}); err != nil {
			return physical{}, fmt.Errorf("update existing queue %s: %w", name, err)
		}
	default:
		return physical{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	got, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return physical{}, fmt.Errorf("read ARN of queue %s: %w", name, err)
	}
	arn := got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	return physical{Type: r.Type, Ref: url, Attrs: map[string]string{"Arn": arn, "QueueName": name, "QueueUrl": url}}, nil
}

func (d *deployer) put(ctx context.Context, in *ssm.PutParameterInput) error {
	if _, err := d.ssm.PutParameter(ctx, in); err != nil {
		return fmt.Errorf("put parameter %s: %w", aws.ToString(in.Name), err)
	}
	return nil
}

// putParams writes the parameter overrides under the functions' parameter
// path, in name order, and records the parameters in force.
func (d *deployer) putParams(ctx context.Context) error {
	path, err := d.paramPath()
	if err != nil {
		return err
	}
	d.st.ParamPath = path
	d.st.Params = params.Defaults().Format()
	for _, name := range slices.Sorted(maps.Keys(d.opts.ParamOverrides)) {
		if d.st.ParamPath == "" {
			return fmt.Errorf("parameter override %s: no function has a PARAM_PATH to put it under", name)
		}
		value := d.opts.ParamOverrides[name]
		if err := d.put(ctx, &ssm.PutParameterInput{
			Name: aws.String(d.st.ParamPath + name), Value: aws.String(value), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
		}); err != nil {
			return err
		}
		d.st.Params[name] = value
	}
	return nil
}

// paramPath returns the functions' PARAM_PATH (Globals gives it to each),
// "" if none has one.
func (d *deployer) paramPath() (string, error) {
	path, from := "", ""
	for _, id := range d.t.order {
		r := d.t.resources[id]
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		env, err := d.functionEnv(r.Properties)
		if err != nil {
			return "", fmt.Errorf("%s: %w", id, err)
		}
		p, ok := env["PARAM_PATH"]
		switch {
		case !ok:
		case path == "":
			path, from = p, id
		case p != path:
			return "", fmt.Errorf("%s has PARAM_PATH %q, %s %q: the functions must share their parameters", id, p, from, path)
		}
	}
	return path, nil
}

// functionEnv resolves the Environment.Variables of a function's
// properties.
func (d *deployer) functionEnv(props map[string]any) (map[string]string, error) {
	vars := mapOf(mapOf(props["Environment"])["Variables"])
	out := make(map[string]string, len(vars))
	for k, v := range vars {
		s, err := d.ev.str(v)
		if err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// describe fills in what the template says about the functions, now that
// the resources they refer to exist.
func (d *deployer) describe() error {
	st := d.st
	for id, dst := range map[string]*string{HostsTable: &st.TableName, InputQueue: &st.InputQueueURL, InputDLQ: &st.InputDLQURL, OutputQueue: &st.OutputQueueURL, BodyBucket: &st.BodyBucket} {
		r, ok := st.Resources[id]
		if !ok {
			return fmt.Errorf("template has no %s: the Go code needs it", id)
		}
		*dst = r.Ref
	}
	n, err := strconv.Atoi(st.Parameters["ShardCount"])
	if err != nil {
		return fmt.Errorf("parameter ShardCount=%q: %w", st.Parameters["ShardCount"], err)
	}
	st.ShardCount = n

	for _, id := range d.t.order {
		r := d.t.resources[id]
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		env, err := d.functionEnv(r.Properties)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		f := Function{Env: env}
		// Lambda's defaults: 3 s and 128 MB.
		timeout, err := d.wholeNumber(r.Properties, "Timeout", 3)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		f.Timeout = time.Duration(timeout) * time.Second
		if f.MemorySize, err = d.wholeNumber(r.Properties, "MemorySize", 128); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if f.EphemeralStorageMB, err = d.wholeNumber(mapOf(r.Properties["EphemeralStorage"]), "Size", 512); err != nil {
			return fmt.Errorf("%s: EphemeralStorage: %w", id, err)
		}
		st.Functions[id] = f
	}
	if err := d.eventSourceMappings(); err != nil {
		return err
	}
	if _, ok := st.Functions[IngestFunction]; !ok {
		return fmt.Errorf("template has no %s: the Go code needs it", IngestFunction)
	}
	if st.IngestEventSource.QueueURL == "" {
		return fmt.Errorf("%s has no SQS event", IngestFunction)
	}
	return d.rules()
}

// wholeNumber reads a whole-number property of a function, else def.
func (d *deployer) wholeNumber(props map[string]any, key string, def int) (int, error) {
	v, ok := props[key]
	if !ok {
		return def, nil
	}
	s, err := d.ev.str(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, s, err)
	}
	return n, nil
}

// enabled reports whether resource id is created in this deployment: it has
// no Condition, or its condition holds.
func (d *deployer) enabled(id string) (bool, error) {
	c := d.t.resources[id].Condition
	if c == "" {
		return true, nil
	}
	on, err := d.ev.condition(c)
	if err != nil {
		return false, fmt.Errorf("%s: %w", id, err)
	}
	return on, nil
}

// eventSourceMappings reads the enabled SQS event source mappings of the
// template's functions: a SAM function's SQS events, which the translator
// makes AWS::Lambda::EventSourceMapping resources.
func (d *deployer) eventSourceMappings() error {
	for _, id := range d.t.order {
		r := d.t.resources[id]
		if r.Type != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		if on, err := d.enabled(id); err != nil {
			return err
		} else if !on {
			continue
		}
		// FunctionName refers to a function, which is not created
		// locally: read the reference, evaluate the rest.
		fn := functionOf(r.Properties["FunctionName"])
		if _, ok := d.st.Functions[fn]; !ok {
			return fmt.Errorf("%s: FunctionName %v is not a function of the template", id, r.Properties["FunctionName"])
		}
		props := maps.Clone(r.Properties)
		delete(props, "FunctionName")
		var c struct {
			EventSourceArn                 string
			BatchSize                      *num
			MaximumBatchingWindowInSeconds *num
			FunctionResponseTypes          []string
			Enabled                        *flag
			ScalingConfig                  *struct{ MaximumConcurrency *num }
			FilterCriteria                 json.RawMessage
		}
		if err := d.decode(resource{ID: id, Type: r.Type, Properties: props}, &c); err != nil {
			return err
		}
		if c.Enabled != nil && !*c.Enabled {
			continue
		}
		esm := EventSourceMapping{Function: fn, BatchSize: 10}
		if c.BatchSize != nil {
			esm.BatchSize = int(*c.BatchSize)
		}
		if c.MaximumBatchingWindowInSeconds != nil {
			esm.MaximumBatchingWindowInSeconds = int(*c.MaximumBatchingWindowInSeconds)
		}
		esm.ReportBatchItemFailures = slices.Contains(c.FunctionResponseTypes, "ReportBatchItemFailures")
		if c.ScalingConfig != nil && c.ScalingConfig.MaximumConcurrency != nil {
			esm.MaximumConcurrency = int(*c.ScalingConfig.MaximumConcurrency)
		}
		queueID, q, ok := d.byArn(c.EventSourceArn)
		if !ok {
			return fmt.Errorf("%s: event source %s is not a queue of the template", id, c.EventSourceArn)
		}
		esm.QueueURL = q.Ref
		if rp := mapOf(d.t.resources[queueID].Properties["RedrivePolicy"]); len(rp) > 0 {
			var policy struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
				MaxReceiveCount     num    `json:"maxReceiveCount"`
			}
			if err := d.decode(resource{ID: queueID + " RedrivePolicy", Type: "RedrivePolicy", Properties: rp}, &policy); err != nil {
				return err
			}
			esm.MaxReceiveCount = int(policy.MaxReceiveCount)
			if _, dlq, ok := d.byArn(policy.DeadLetterTargetArn); ok {
				esm.DLQURL = dlq.Ref
			}
		}
		var dst *EventSourceMapping
		switch fn {
		case IngestFunction:
			dst = &d.st.IngestEventSource
		case CheckFunction:
			dst = &d.st.WakeEventSource
		default:
			continue
		}
		if dst.QueueURL != "" {
			return fmt.Errorf("%s: a second SQS event of %s: the local pipeline polls one", id, fn)
		}
		*dst = esm
	}
	return nil
}

// rules reads the enabled AWS::Events::Rule schedules whose targets are
// functions of the template (a SAM function's Schedule events are such
// rules after translation).
func (d *deployer) rules() error {
	for _, id := range d.t.order {
		r := d.t.resources[id]
		if r.Type != "AWS::Events::Rule" {
			continue
		}
		if on, err := d.enabled(id); err != nil {
			return err
		} else if !on {
			continue
		}
		expr, ok := r.Properties["ScheduleExpression"]
		if !ok {
			continue // an event pattern rule, not a schedule
		}
		exprS, err := d.ev.str(expr)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if state, _ := r.Properties["State"].(string); state != "" && state != "ENABLED" {
			continue
		}
		every, err := ratePeriod(exprS)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		targets, _ := r.Properties["Targets"].([]any)
		for _, tg := range targets {
			target := mapOf(tg)
			fn := functionOf(target["Arn"])
			if _, ok := d.st.Functions[fn]; !ok {
				continue
			}
			input := ""
			if v, ok := target["Input"]; ok {
				if input, err = d.ev.str(v); err != nil {
					return fmt.Errorf("%s: Input: %w", id, err)
				}
			}
			d.st.Schedules = append(d.st.Schedules, Schedule{Rule: id, Function: fn, Expression: exprS, Every: every, Input: input})
		}
	}
	return nil
}

// functionOf returns the function that {"Fn::GetAtt": [F, "Arn"]} or
// {"Ref": F} names, or "".
func functionOf(v any) string {
	m := mapOf(v)
	if ref, ok := m["Ref"].(string); ok {
		return ref
	}
	if a, ok := m["Fn::GetAtt"].([]any); ok && len(a) == 2 && a[1] == "Arn" {
		s, _ := a[0].(string)
		return s
	}
	return ""
}

// byArn finds the created resource with the given ARN.
func (d *deployer) byArn(arn string) (string, Resource, bool) {
	for id, r := range d.st.Resources {
		if r.Arn != "" && r.Arn == arn {
			return id, r, true
		}
	}
	return "", Resource{}, false
}

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// ratePeriod returns the period of a rate() schedule expression and 0 for
// a cron() one.
func ratePeriod(expr string) (time.Duration, error) {
	if strings.HasPrefix(expr, "cron(") {
		return 0, nil
	}
	m := rateExpr.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule expression %q: want rate(N unit) or cron(...)", expr)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
	return time.Duration(n) * unit, nil
}
