package zipf

import "testing"

// TestSizes: the list issue 24 prices has the sizes its description gives
// (the busiest host at 1,000 URLs, 9,334 hosts with one: every host past
// rank 666, 16,449 URLs), and another exponent follows its law.
func TestSizes(t *testing.T) {
	s := Sizes(Hosts, Top, 1)
	ones := 0
	for _, n := range s {
		if n == 1 {
			ones++
		}
	}
	if s[0] != 1000 || s[1] != 500 || s[2] != 333 || s[665] != 2 || s[666] != 1 || ones != 9334 || Total(s) != 16449 {
		t.Errorf("sizes: first %v, ranks 666-667 %v, %d hosts of one URL, %d URLs; want [1000 500 333], [2 1], 9334, 16449", s[:3], s[665:667], ones, Total(s))
	}
	if got := Sizes(3, 10, 2); got[0] != 10 || got[1] != 3 || got[2] != 1 {
		t.Errorf("s=2: %v, want [10 3 1]", got)
	}
}
