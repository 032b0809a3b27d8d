package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

func TestBudgetWorkers(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		b       Budget
		maxBody int64
		want    int
	}{
		{"unbounded", Budget{}, 200 << 10, 0},
		{"memory: 1 MiB per worker at 200 KiB bodies", Budget{Memory: 200 * mib}, 200 << 10, 198},
		{"memory: larger bodies, fewer workers", Budget{Memory: 200 * mib}, 10 * mib, 6},
		{"connections: seven eighths of them", Budget{Conns: 700}, 200 << 10, 613},
		{"the tighter of the two", Budget{Memory: 200 * mib, Conns: 100}, 200 << 10, 88},
		{"local mode on this kind of machine: 10,000 hosts at once", Budget{Memory: 12 << 30, Conns: 20000 - 256}, 200 << 10, 12192},
		{"never below one", Budget{Memory: 1, Conns: 1}, 10 * mib, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Workers(tc.maxBody); got != tc.want {
				t.Errorf("Workers(%d) = %d, want %d (WorkerBytes %d)", tc.maxBody, got, tc.want, WorkerBytes(tc.maxBody))
			}
		})
	}
}

// TestRobotsCacheBytes: the robots cache holds at most its byte limit,
// dropping the least recently used origin first, and never keeps a file
// larger than the whole limit.
func TestRobotsCacheBytes(t *testing.T) {
	policyOf := func(kib int) *policy {
		body := "User-agent: *\n" + strings.Repeat("Disallow: /x\n", kib*1024/13)
		rules, err := robots.Parse(200, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return &policy{rules: rules, fetchedAt: time.Now()}
	}
	one := policyOf(10).size()
	c := &robotsCache{limit: 3*one + one/2}
	for i := range 3 {
		c.put(fmt.Sprint("http://h", i), policyOf(10))
	}
	c.get("http://h0") // h1 is now the least recently used
	c.put("http://h3", policyOf(10))
	for origin, want := range map[string]bool{"http://h0": true, "http://h1": false, "http://h2": true, "http://h3": true} {
		if got := c.get(origin) != nil; got != want {
			t.Errorf("%s cached %v, want %v", origin, got, want)
		}
	}
	if c.bytes > c.limit || c.bytes != 3*one {
		t.Errorf("cache counts %d bytes, want 3 files (%d) within %d", c.bytes, 3*one, c.limit)
	}
	c.put("http://huge", policyOf(40))
	if c.get("http://huge") != nil || c.bytes != 3*one {
		t.Errorf("a file larger than the whole cache was kept (%d bytes counted)", c.bytes)
	}
	c.put("http://h2", policyOf(10)) // replacing counts once
	if c.bytes != 3*one || len(c.m) != 3 {
		t.Errorf("after replacing an entry: %d bytes in %d entries, want %d in 3", c.bytes, len(c.m), 3*one)
	}
}
