package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// TCPCounters are the kernel's TCP counters that show connection churn and
// a listener that cannot keep up: SYNs sent again (each costs the client a
// second or more), connections dropped because an accept queue was full,
// and connections opened. They are the network namespace's, so whatever
// else runs on the machine at the same time counts into them too.
type TCPCounters struct {
	// SynRetrans is TcpExt TCPSynRetrans, ListenOverflows and ListenDrops
	// TcpExt's of those names (/proc/net/netstat); ActiveOpens is Tcp
	// ActiveOpens (/proc/net/snmp).
	SynRetrans, ListenOverflows, ListenDrops, ActiveOpens int64
}

// readTCPCounters reads the counters; a missing file or field is an error,
// so that a run never reports a zero it did not read.
func readTCPCounters() (TCPCounters, error) {
	ext, err := procNetTable("/proc/net/netstat", "TcpExt")
	if err != nil {
		return TCPCounters{}, err
	}
	tcp, err := procNetTable("/proc/net/snmp", "Tcp")
	if err != nil {
		return TCPCounters{}, err
	}
	var c TCPCounters
	for _, f := range []struct {
		table map[string]int64
		name  string
		to    *int64
	}{{ext, "TCPSynRetrans", &c.SynRetrans}, {ext, "ListenOverflows", &c.ListenOverflows}, {ext, "ListenDrops", &c.ListenDrops}, {tcp, "ActiveOpens", &c.ActiveOpens}} {
		v, ok := f.table[f.name]
		if !ok {
			return TCPCounters{}, fmt.Errorf("no %s in the kernel's TCP counters", f.name)
		}
		*f.to = v
	}
	return c, nil
}

// Sub is the change from before to c.
func (c TCPCounters) Sub(before TCPCounters) TCPCounters {
	return TCPCounters{
		SynRetrans:      c.SynRetrans - before.SynRetrans,
		ListenOverflows: c.ListenOverflows - before.ListenOverflows,
		ListenDrops:     c.ListenDrops - before.ListenDrops,
		ActiveOpens:     c.ActiveOpens - before.ActiveOpens,
	}
}

// procNetTable reads one table of a /proc/net counters file: a line of
// names after "prefix:" and the next such line of values.
func procNetTable(path, prefix string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseNetTable(string(b), prefix)
}

func parseNetTable(text, prefix string) (map[string]int64, error) {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix+":"); ok {
			rows = append(rows, strings.Fields(rest))
		}
	}
	if len(rows) < 2 || len(rows[0]) != len(rows[1]) {
		return nil, fmt.Errorf("no %s table", prefix)
	}
	out := map[string]int64{}
	for i, name := range rows[0] {
		v, err := strconv.ParseInt(rows[1][i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", prefix, name, err)
		}
		out[name] = v
	}
	return out, nil
}
