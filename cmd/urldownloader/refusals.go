package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// shownRefusals is how many refused input lines are printed one by one
// (all of them under -v): a list with a fault on every line would
// otherwise bury the summary under thousands of lines.
const shownRefusals = 10

// refusalPrinter prints the first refused input lines and counts the rest.
type refusalPrinter struct {
	w   io.Writer
	all bool

	mu    sync.Mutex
	shown int
	more  int
}

func (p *refusalPrinter) print(r localmode.Rejected) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.all && p.shown == shownRefusals {
		p.more++
		return
	}
	p.shown++
	fmt.Fprintf(p.w, "urldownloader: line %d not accepted: %s\n", r.Line, r.Error)
}

// printMore says how many refusals were not printed.
func (p *refusalPrinter) printMore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.more > 0 {
		fmt.Fprintf(p.w, "urldownloader: ... and %d more lines refused (-v prints every one)\n", p.more)
	}
}

// notTextHint says how to turn an input that is not UTF-8 text (kind, as
// localmode.NotTextError names it) into one. urls is the --urls value.
func notTextHint(kind, urls string) string {
	file := urls
	if urls == "-" {
		file = "FILE"
	}
	pipe := " | urldownloader --urls - (with the other flags as before)"
	switch kind {
	case "gzip":
		return "decompress it first: zcat " + file + pipe
	case "bzip2":
		return "decompress it first: bzcat " + file + pipe
	case "xz":
		return "decompress it first: xzcat " + file + pipe
	case "zstd":
		return "decompress it first: zstdcat " + file + pipe
	case "zip":
		return "extract the list first: unzip -p " + file + pipe
	case "UTF-16", "UTF-32":
		return "convert it first: iconv -f " + kind + " -t UTF-8 " + file + pipe
	}
	return "give a text list: one URL (or JSON object) per line, in UTF-8"
}

// listName is how messages name the --urls value.
func listName(urls string) string {
	if urls == "-" {
		return "- (standard input)"
	}
	return urls
}
