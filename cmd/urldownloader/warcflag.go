package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

var (
	warcFlag         = flag.String("warc", "", "local backend: also keep every request and its answer (robots.txt and redirects included) as WARC 1.1 records: out.warc.gz writes out-00000.warc.gz, out-00001.warc.gz, ... (a new file per run and past --warc-max-bytes); each result names its record in its \"warc\" field")
	warcMaxBytesFlag = flag.Int64("warc-max-bytes", 0, "with --warc: roll over to the next file past this size (default 1000000000)")
)

// printWarc says where the WARC records went.
func printWarc(w io.Writer, files []string) {
	if *warcFlag == "" {
		return
	}
	if len(files) == 0 {
		fmt.Fprintln(w, "urldownloader: warc: no request made, no file written")
		return
	}
	fmt.Fprintf(w, "urldownloader: warc: records in %s (read them with warcio: warcio index %s)\n", strings.Join(files, ", "), files[0])
}
