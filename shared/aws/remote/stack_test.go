package remote

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/urldownloader/urldownloader/internal/stack"
)

// outputsTemplate is a CloudFormation stack with the template's output
// names and the values given as parameters. internal/stack creates the
// template's resources directly (moto's CloudFormation cannot create the
// serverless transform), so the lookup is tested on a stack of its own
// whose outputs point at that deployment.
const outputsTemplate = `{
  "AWSTemplateFormatVersion": "2010-09-09",
  "Parameters": {
    "In": {"Type": "String"}, "Out": {"Type": "String"}, "Bucket": {"Type": "String"}
  },
  "Resources": {
    "Marker": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "${AWS::StackName}-marker"}}}
  },
  "Outputs": {
    "InputQueueUrl": {"Value": {"Ref": "In"}},
    "OutputQueueUrl": {"Value": {"Ref": "Out"}},
    "BodyBucketName": {"Value": {"Ref": "Bucket"}},
    "ApiUrl": {"Value": "https://example.invalid/dev/urls"}
  }
}`

// createOutputsStack creates on moto a CloudFormation stack whose outputs
// name st's queues and bucket, and returns its name.
func createOutputsStack(t *testing.T, cfg aws.Config, st *stack.Stack) string {
	t.Helper()
	name := stack.UniquePrefix("cfn-" + t.Name())
	cfn := cloudformation.NewFromConfig(cfg)
	_, err := cfn.CreateStack(t.Context(), &cloudformation.CreateStackInput{
		StackName:    &name,
		TemplateBody: aws.String(outputsTemplate),
		Parameters: []cfntypes.Parameter{
			{ParameterKey: aws.String("In"), ParameterValue: &st.InputQueueURL},
			{ParameterKey: aws.String("Out"), ParameterValue: &st.OutputQueueURL},
			{ParameterKey: aws.String("Bucket"), ParameterValue: &st.BodyBucket},
		},
	})
	if err != nil {
		t.Fatalf("create stack on moto: %v", err)
	}
	return name
}

func TestStackEndpointsFromOutputs(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	name := createOutputsStack(t, cfg, st)
	cfn := cloudformation.NewFromConfig(cfg)

	got, err := StackEndpoints(t.Context(), cfn, name)
	if err != nil {
		t.Fatal(err)
	}
	want := Endpoints{InputQueue: st.InputQueueURL, OutputQueue: st.OutputQueueURL, BodyBucket: st.BodyBucket}
	if got != want {
		t.Fatalf("endpoints %+v, want %+v", got, want)
	}

	t.Run("no such stack", func(t *testing.T) {
		_, err := StackEndpoints(t.Context(), cfn, name+"-absent")
		if err == nil || !strings.Contains(err.Error(), name+"-absent") {
			t.Fatalf("err = %v, want one naming the stack", err)
		}
	})
}

func TestStackEndpointsRefusesAnotherStack(t *testing.T) {
	t.Parallel()
	_, cfg := stack.DeployForTest(t, stack.Options{})
	name := stack.UniquePrefix("other-" + t.Name())
	cfn := cloudformation.NewFromConfig(cfg)
	_, err := cfn.CreateStack(t.Context(), &cloudformation.CreateStackInput{
		StackName: &name,
		TemplateBody: aws.String(`{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
			"Outputs": {"QueueUrl": {"Value": {"Ref": "Q"}}}}`),
	})
	if err != nil {
		t.Fatalf("create stack on moto: %v", err)
	}
	_, err = StackEndpoints(t.Context(), cfn, name)
	if err == nil || !strings.Contains(err.Error(), "InputQueueUrl") || !strings.Contains(err.Error(), "it has: QueueUrl") {
		t.Fatalf("err = %v, want one naming the outputs wanted and those it has", err)
	}
}
