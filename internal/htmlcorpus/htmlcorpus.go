// Package htmlcorpus finds real HTML installed on the machine, offline,
// for measurements that need web-like text (gzip's ratio on result
// bodies): the Go distribution's doc/*.html and the HTML documentation
// under /usr/share/doc. What it finds depends on what is installed; a
// caller with none skips.
package htmlcorpus

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Roots are the folders searched, in order: the Go distribution's doc
// folder (from `go env GOROOT`, as the tests and benchmarks that use the
// corpus run under the go command) and /usr/share/doc.
func Roots() []string {
	roots := []string{"/usr/share/doc"}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		roots = append([]string{filepath.Join(string(bytes.TrimSpace(out)), "doc")}, roots...)
	}
	return roots
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
