package stack

import (
	"strings"
	"testing"
)

// TestTableCapacityMode: the hosts table is on demand by default, with no
// capacity and no scaling resources; with TableBillingMode PROVISIONED it
// starts at the minimums, and both its capacities (reads and writes) are
// auto-scaled between the minimum and maximum at the target utilization.
// It has no secondary index to scale (the due index is items of the
// table).
func TestTableCapacityMode(t *testing.T) {
	tpl := loadTemplate(t)
	dims := map[string]string{
		"HostsTableTableReadScaling":  "dynamodb:table:ReadCapacityUnits",
		"HostsTableTableWriteScaling": "dynamodb:table:WriteCapacityUnits",
	}
	if p := tpl.resources[HostsTable].Properties; p["GlobalSecondaryIndexes"] != nil {
		t.Errorf("the table has secondary indexes: %v", p["GlobalSecondaryIndexes"])
	}
	for id := range tpl.resources {
		if strings.HasPrefix(id, "HostsTableIndex") {
			t.Errorf("%s: a scaling resource for an index the table does not have", id)
		}
	}

	e := deployed(t, tpl, nil)
	p := e.props(t, HostsTable)
	if got := str(p["BillingMode"]); got != "PAY_PER_REQUEST" {
		t.Errorf("default BillingMode %s, want PAY_PER_REQUEST", got)
	}
	if p["ProvisionedThroughput"] != nil {
		t.Errorf("on demand with provisioned throughput: %v", p)
	}
	for id := range dims {
		for _, x := range []string{id, id + "Policy"} {
			if on, err := e.condition(tpl.resources[x].Condition); err != nil || on {
				t.Errorf("%s enabled on demand (%v)", x, err)
			}
		}
	}

	e = deployed(t, tpl, map[string]string{
		"TableBillingMode": "PROVISIONED", "TableTargetUtilization": "60",
		"TableMinReadCapacity": "5", "TableMaxReadCapacity": "500", "TableMinWriteCapacity": "7", "TableMaxWriteCapacity": "700",
	})
	p = e.props(t, HostsTable)
	if got := str(p["BillingMode"]); got != "PROVISIONED" {
		t.Errorf("BillingMode %s, want PROVISIONED", got)
	}
	for _, path := range []string{"ProvisionedThroughput"} {
		if r, w := str(at(p, path+".ReadCapacityUnits")), str(at(p, path+".WriteCapacityUnits")); r != "5" || w != "7" {
			t.Errorf("%s: read %s, write %s; want the minimums 5 and 7", path, r, w)
		}
	}
	for id, dim := range dims {
		if on, err := e.condition(tpl.resources[id].Condition); err != nil || !on {
			t.Fatalf("%s not enabled when provisioned (%v)", id, err)
		}
		sp := e.props(t, id)
		lo, hi, metric := "5", "500", "DynamoDBReadCapacityUtilization"
		if strings.HasSuffix(dim, "WriteCapacityUnits") {
			lo, hi, metric = "7", "700", "DynamoDBWriteCapacityUtilization"
		}
		wantRes := "table/ref-HostsTable"
		if str(sp["ScalableDimension"]) != dim || str(sp["ResourceId"]) != wantRes || str(sp["MinCapacity"]) != lo || str(sp["MaxCapacity"]) != hi || str(sp["ServiceNamespace"]) != "dynamodb" {
			t.Errorf("%s: %v; want %s of %s between %s and %s", id, sp, dim, wantRes, lo, hi)
		}
		pp := e.props(t, id+"Policy")
		cfg := "TargetTrackingScalingPolicyConfiguration."
		if str(pp["ScalingTargetId"]) != "ref-"+id || str(at(pp, cfg+"TargetValue")) != "60" || str(pp["PolicyType"]) != "TargetTrackingScaling" ||
			str(at(pp, cfg+"PredefinedMetricSpecification.PredefinedMetricType")) != metric {
			t.Errorf("%sPolicy: %v; want target tracking of %s's %s at 60", id, pp, id, metric)
		}
	}
}
