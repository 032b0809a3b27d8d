package billing

// AWS us-east-1 list prices, in dollars, as the benchmark (infra/bench)
// and the simulation (infra/sim) turn units into money and
// docs/benchmarks.md quotes them: one place, so that the measured and the
// simulated figures are priced alike.
const (
	// DynamoDB on demand (after the November 2024 cut): a write request
	// unit and a read request unit.
	PriceWriteUnit = 0.625 / 1e6
	PriceReadUnit  = 0.125 / 1e6
	// DynamoDB provisioned capacity: a write and a read capacity unit for
	// an hour.
	PriceWriteUnitHour = 0.00065
	PriceReadUnitHour  = 0.00013
	// SQS standard queues: a request (per 64 KB chunk of its payload).
	PriceSQSRequest = 0.40 / 1e6
	// Lambda on arm64: a GB-second and an invocation.
	PriceLambdaGBSecond   = 0.0000133334
	PriceLambdaInvocation = 0.20 / 1e6
)

// ProvisionedUse is the utilization the provisioned prices are quoted at:
// the template's TableTargetUtilization default, which auto scaling keeps
// a sustained load near (docs/benchmarks.md, "Capacity mode").
const ProvisionedUse = 0.70

// ProvisionedWriteUnit and ProvisionedReadUnit are what one write or read
// unit costs on provisioned capacity used at use (0 to 1): a unit-hour
// serves 3,600 units at full use.
func ProvisionedWriteUnit(use float64) float64 { return PriceWriteUnitHour / 3600 / use }

// ProvisionedReadUnit: see ProvisionedWriteUnit.
func ProvisionedReadUnit(use float64) float64 { return PriceReadUnitHour / 3600 / use }
