package wiring

import (
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/urldownloader/urldownloader/shared/aws/config"
)

// awsFromEnv builds the AWS configuration a Lambda function needs from the
// variables Lambda sets: the region and the execution role's credentials
// (static for the life of the execution environment), plus
// AWS_ENDPOINT_URL when a local emulator stands in for AWS. The SDK's
// default loader would also link the shared-config, SSO, STS, process and
// instance-metadata credential providers, which a function never uses: a
// megabyte and more of bootstrap, and start-up time on every cold start.
func awsFromEnv(getenv func(string) string) (aws.Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	var missing []error
	if region == "" {
		missing = append(missing, errors.New("AWS_REGION is not set"))
	}
	if id == "" || secret == "" {
		missing = append(missing, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (Lambda sets them from the function's role)"))
	}
	if err := errors.Join(missing...); err != nil {
		return aws.Config{}, err
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))),
		// The same retry policy as every test against the emulators.
		Retryer: func() aws.Retryer { return config.Retryer() },
	}
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}
