package main

// Layout is how the due index is stored: what the store writes when a
// host gets work, when its due time moves and when it leaves.
type Layout int

const (
	// LayoutGSI is shared/dynamo's: the host item's (vs, due) in the
	// KEYS_ONLY GSI, a put when a host enters, a delete when it leaves,
	// both when its due time moves.
	LayoutGSI Layout = iota
)

func layoutName(c Config) string {
	n := [...]string{"today (GSI entry per host)"}[c.Layout]
	if c.LingerRun {
		n += ", one session per host"
	}
	return n
}
