package standalone

import (
	"testing"
	"time"
)

// The politeness bound (the ETA and the summary's yardstick) is the
// slowest queue's URLs × its delay, FetchDelay or a longer Crawl-delay.
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []HostLoad
		want  time.Duration
		worst string
	}{
		{"none", nil, 0, ""},
		{"one host", []HostLoad{{"a.test", 12, time.Second}}, 12 * time.Second, "a.test"},
		// 12 URLs and a Crawl-delay of 4 s on one host outweigh 30 URLs at
		// 1 s elsewhere: the "said 2 s, took 40 s".
		{"crawl-delay wins", []HostLoad{{"a.test", 30, time.Second}, {"slow.test", 10, 4 * time.Second}, {"b.test", 2, time.Second}},
			40 * time.Second, "slow.test"},
		{"many small hosts", []HostLoad{{"a.test", 1, time.Second}, {"b.test", 1, time.Second}, {"c.test", 3, 250 * time.Millisecond}},
			time.Second, "a.test"},
		{"empty queues", []HostLoad{{"a.test", 0, time.Second}}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, worst := Bound(tc.hosts)
			if got != tc.want || worst.Key != tc.worst {
				t.Errorf("Bound = %s (%q), want %s (%q)", got, worst.Key, tc.want, tc.worst)
			}
		})
	}
}
