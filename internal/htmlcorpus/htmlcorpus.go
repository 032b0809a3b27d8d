// Package htmlcorpus finds real HTML installed on the machine, offline,
// for measurements that need web-like text (gzip's ratio on result
// bodies): the Go distribution's doc/*.html and the HTML documentation
// under /usr/share/doc. What it finds depends on what is installed; a
// caller with none skips.
package htmlcorpus

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Roots are the folders searched, in order.
func Roots() []string {
	return []string{filepath.Join(runtime.GOROOT(), "doc"), "/usr/share/doc"}
}

// Files returns the contents of every .html or .htm file under Roots of
// 1 to maxBytes bytes, in path order (so a measurement is repeatable on
// one machine), and their paths.
func Files(maxBytes int) (bodies [][]byte, paths []string) {
	for _, root := range Roots() {
		var found []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".html") || strings.HasSuffix(p, ".htm")) {
				found = append(found, p)
			}
			return nil
		})
		slices.Sort(found)
		for _, p := range found {
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 && len(b) <= maxBytes {
				bodies, paths = append(bodies, b), append(paths, p)
			}
		}
	}
	return bodies, paths
}
