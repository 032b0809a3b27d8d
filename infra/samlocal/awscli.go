package samlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// AWSCLI runs the real AWS CLI (installed pinned into the .venv by `make
// tools`) against an emulator: a client nobody here wrote reads what the
// functions wrote.
type AWSCLI struct {
	// Path is the aws command.
	Path string
	// Endpoint is the emulator's URL, passed as --endpoint-url.
	Endpoint string
}

// NewAWSCLI finds the .venv's aws command in the module at root.
func NewAWSCLI(root, endpoint string) (*AWSCLI, error) {
	p := filepath.Join(root, ".venv", "bin", "aws")
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("aws cli: %s is missing: run `make tools`", p)
	}
	if err := checkLoopback(endpoint); err != nil {
		return nil, fmt.Errorf("aws cli: %w", err)
	}
	return &AWSCLI{Path: p, Endpoint: endpoint}, nil
}

// Env is what the CLI needs to talk to moto and nothing else: fixed test
// credentials and region, and no developer profile or config file.
func (c *AWSCLI) Env() []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=",
		"AWS_DEFAULT_REGION=us-east-1", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
}

// Run runs `aws ARGS --endpoint-url ENDPOINT --output json` and returns
// its stdout.
func (c *AWSCLI) Run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, append(args, "--endpoint-url", c.Endpoint, "--output", "json")...)
	cmd.Env = c.Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("aws %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Message is one message as `aws sqs receive-message` prints it.
type Message struct {
	MessageID     string `json:"MessageId"`
	ReceiptHandle string `json:"ReceiptHandle"`
	Body          string `json:"Body"`
}

// Receive reads up to 10 messages with `aws sqs receive-message`, waiting
// up to wait for the first, and deletes what it read with `aws sqs
// delete-message-batch`, as a consumer does.
func (c *AWSCLI) Receive(ctx context.Context, queueURL string, wait time.Duration) ([]Message, error) {
	out, err := c.Run(ctx, "sqs", "receive-message", "--queue-url", queueURL,
		"--max-number-of-messages", "10", "--wait-time-seconds", strconv.Itoa(int(wait.Seconds())))
	if err != nil {
		return nil, err
	}
	// An empty receive prints nothing at all.
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	var got struct{ Messages []Message }
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("aws sqs receive-message: output %q: %w", out, err)
	}
	if len(got.Messages) == 0 {
		return nil, nil
	}
	type entry struct {
		ID            string `json:"Id"`
		ReceiptHandle string `json:"ReceiptHandle"`
	}
	var entries []entry
	for i, m := range got.Messages {
		entries = append(entries, entry{ID: strconv.Itoa(i), ReceiptHandle: m.ReceiptHandle})
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	out, err = c.Run(ctx, "sqs", "delete-message-batch", "--queue-url", queueURL, "--entries", string(b))
	if err != nil {
		return got.Messages, err
	}
	var del struct{ Failed []json.RawMessage }
	if err := json.Unmarshal(out, &del); err != nil {
		return got.Messages, fmt.Errorf("aws sqs delete-message-batch: output %q: %w", out, err)
	}
	if len(del.Failed) > 0 {
		return got.Messages, fmt.Errorf("aws sqs delete-message-batch: %d failed: %s", len(del.Failed), del.Failed[0])
	}
	return got.Messages, nil
}
