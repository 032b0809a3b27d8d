package dynamo

// DuePKs is the partition keys of vshard's due index, for tests that read
// its items raw.
func DuePKs(vshard int) []string {
	out := make([]string, dueSpread)
	for k := range out {
		out[k] = duePK(vshard, k)
	}
	return out
}
