package moto_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dt "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// TestStartServesDynamoDB starts a private server (not the shared one, so
// that Reset and Close cannot disturb other tests) and drives its life.
func TestStartServesDynamoDB(t *testing.T) {
	ctx := t.Context()
	srv, err := moto.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:") {
		t.Errorf("Endpoint = %q, want a loopback URL", srv.Endpoint)
	}
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	db := dynamodb.NewFromConfig(cfg)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("t"),
		BillingMode:          dt.BillingModePayPerRequest,
		AttributeDefinitions: []dt.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dt.ScalarAttributeTypeS}},
		KeySchema:            []dt.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dt.KeyTypeHash}},
	}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	out, err := db.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	if got := out.TableNames; len(got) != 1 || got[0] != "t" {
		t.Errorf("ListTables = %v, want [t]", got)
	}

	if err := srv.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	out, err = db.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables after Reset: %v", err)
	}
	if len(out.TableNames) != 0 {
		t.Errorf("ListTables after Reset = %v, want none", out.TableNames)
	}

	srv.Close()
	srv.Close() // a second Close is harmless
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get(srv.Endpoint + "/moto-api/data.json"); err == nil {
		resp.Body.Close()
		t.Errorf("server still answers after Close")
	}
}

func TestSharedIsOneServer(t *testing.T) {
	a, b := moto.Shared(t), moto.Shared(t)
	if a != b {
		t.Errorf("Shared returned two servers: %s and %s", a.Endpoint, b.Endpoint)
	}
}

func TestFindServerMissingSaysMakeTools(t *testing.T) {
	t.Setenv(moto.EnvServer, "/nonexistent/moto_server")
	_, err := moto.FindServer()
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("FindServer error = %v, want one that says to run make tools", err)
	}
	if _, err := moto.Start(t.Context()); err == nil {
		t.Errorf("Start with a missing moto_server succeeded")
	}
}

// TestAWSConfigIgnoresEnvironment: a developer's AWS settings must neither
// break the tests nor send their requests to a real account.
func TestAWSConfigIgnoresEnvironment(t *testing.T) {
	srv := moto.Shared(t)
	t.Setenv("AWS_PROFILE", "no-such-profile")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	if cfg.Region != moto.Region {
		t.Errorf("Region = %q, want %q", cfg.Region, moto.Region)
	}
	if _, err := dynamodb.NewFromConfig(cfg).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("ListTables: %v", err)
	}
}

func TestAWSConfigNeedsEndpoint(t *testing.T) {
	if _, err := moto.AWSConfig(t.Context(), ""); err == nil {
		t.Error("AWSConfig with no endpoint succeeded")
	}
}

func TestEnvPointsAtEndpoint(t *testing.T) {
	env := moto.Env("http://127.0.0.1:5000")
	for k, want := range map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
		"AWS_REGION":       moto.Region,
	} {
		if env[k] != want {
			t.Errorf("Env()[%s] = %q, want %q", k, env[k], want)
		}
	}
	if env["AWS_ACCESS_KEY_ID"] == "" {
		t.Error("Env() has no credentials")
	}
}
