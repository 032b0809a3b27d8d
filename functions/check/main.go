// Command check is the check Lambda: one scheduled invocation per shard runs
// that shard's due hosts. It only wires; see package checkhandler.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/urldownloader/urldownloader/functions/check/checkhandler"
	"github.com/urldownloader/urldownloader/shared/check"
	"github.com/urldownloader/urldownloader/shared/wiring"
)

func main() {
	s, log, err := wiring.FromEnv(context.Background())
	if err != nil {
		log.Error("start check", "error", err)
		os.Exit(1)
	}
	// A FetchTimeout that leaves no room in a run is refused like any bad
	// value, and a cold start during a parameter store outage fails its
	// run rather than fetch with defaults the operator did not choose.
	s.Params.LimitFetchTimeout(check.FetchTimeoutLimit(checkhandler.RunWindow(s.Config.CheckRun)))
	s.Engine.ParamsReady = s.Params.WaitLoaded
	h := &checkhandler.Handler{Runner: s.Engine, ShardCount: s.Config.ShardCount, Run: s.Config.CheckRun, Now: time.Now, Log: log, Metrics: s.Metrics}
	lambda.Start(h.Handle)
}
