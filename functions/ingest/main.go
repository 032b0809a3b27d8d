// Command ingest is the ingest Lambda: SQS input batches and POST /urls into
// the hosts' queues. It only wires; see package handler.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/urldownloader/urldownloader/functions/ingest/handler"
	"github.com/urldownloader/urldownloader/shared/config"
	"github.com/urldownloader/urldownloader/shared/services"
)

func main() {
	cfg, err := config.FromEnv(nil)
	if err != nil {
		slog.Error("start ingest", "error", err)
		os.Exit(1)
	}
	log := cfg.Logger()
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS config", "error", err)
		os.Exit(1)
	}
	s := services.New(awsCfg, cfg, services.Options{Log: log})
	h := &handler.Handler{Ingester: s.Ingester, Params: s.Params.Get, Log: log}
	lambda.Start(h.Handle)
}
