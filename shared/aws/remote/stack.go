// Package remote is the client side of a deployed stack: `urldownloader
// send` puts a URL list on its input queue, grouped and packed as
// docs/messages.md recommends for cost, resuming where it stopped, and
// `urldownloader receive` takes results off its output queue into a JSON
// lines file, bodies from the body bucket on request, deleting only what
// is written and synced. The queues come from the stack's CloudFormation
// outputs or from flags; credentials and region from the SDK's usual
// chain (environment, shared config and credentials files, SSO, the
// instance's role), which is why this package, and not the product's
// functions, imports aws-sdk-go-v2/config.
package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
)

// StackAPI is the part of the CloudFormation client Resolve uses.
type StackAPI interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// The template's output names (template.yaml, Outputs) this package reads.
const (
	OutputInputQueue  = "InputQueueUrl"
	OutputOutputQueue = "OutputQueueUrl"
	OutputBodyBucket  = "BodyBucketName"
)

// Endpoints are what the commands talk to: the stack's queues and bucket.
type Endpoints struct {
	InputQueue  string
	OutputQueue string
	BodyBucket  string
}

// StackEndpoints reads a deployed stack's queues and bucket from its
// outputs. A stack without the template's outputs (another stack by that
// name) is an error naming the outputs it has.
func StackEndpoints(ctx context.Context, api StackAPI, stack string) (Endpoints, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := api.DescribeStacks(cctx, &cloudformation.DescribeStacksInput{StackName: &stack})
	if err != nil {
		return Endpoints{}, fmt.Errorf("describe stack %s: %w", stack, err)
	}
	if len(out.Stacks) == 0 {
		return Endpoints{}, fmt.Errorf("describe stack %s: no such stack", stack)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	e := Endpoints{
		InputQueue:  outputs[OutputInputQueue],
		OutputQueue: outputs[OutputOutputQueue],
		BodyBucket:  outputs[OutputBodyBucket],
	}
	if e.InputQueue == "" || e.OutputQueue == "" {
		names := slices.Sorted(maps.Keys(outputs))
		return e, fmt.Errorf("stack %s has no %s and %s outputs (it has: %s): is it this project's template?",
			stack, OutputInputQueue, OutputOutputQueue, strings.Join(names, ", "))
	}
	return e, nil
}

// errNoQueue is returned when neither a stack nor a queue flag names the
// queue a command needs.
var errNoQueue = errors.New("no queue: give --stack NAME or the queue's URL")
