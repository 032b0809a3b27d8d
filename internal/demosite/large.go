package demosite

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// Large pages: /large/<bytes>/<seed> is <bytes> of pseudo-random bytes
// drawn from seed, streamed (the server never holds a page whole), so
// whole-body tests and benchmarks can ask for pages of any size, and two
// URLs with the same size and seed (on one host or two) serve the same
// body (content-addressed storage keeps it once).

// LargeURL is the URL of the large page of size bytes and seed on host h.
func LargeURL(h string, size int64, seed uint64) string {
	return fmt.Sprintf("http://%s/large/%d/%d", h, size, seed)
}

// LargeBody returns the body LargeURL serves.
func LargeBody(size int64, seed uint64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return io.LimitReader(rand.NewChaCha8(key), size)
}

// LargeSHA256 is the SHA-256 (lowercase hex) of LargeBody(size, seed).
func LargeSHA256(size int64, seed uint64) string {
	h := sha256.New()
	_, _ = io.Copy(h, LargeBody(size, seed))
	return hex.EncodeToString(h.Sum(nil))
}

// serveLarge serves a /large/ path; false if the path is not one.
func serveLarge(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/large/")
	if !ok {
		return false
	}
	sizeText, seedText, _ := strings.Cut(rest, "/")
	size, err1 := strconv.ParseInt(sizeText, 10, 64)
	seed, err2 := strconv.ParseUint(seedText, 10, 64)
	if err1 != nil || err2 != nil || size < 0 || size > 2<<30 {
		http.NotFound(w, r)
		return true
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	_, _ = io.Copy(w, LargeBody(size, seed))
	return true
}

// TextURL is the URL of a text page of exactly size bytes of 'a' on host
// h: a body that stays text (inline as it is, not base64) and costs in a
// message exactly its size (no JSON escapes), for the inline threshold.
func TextURL(h string, size int64) string {
	return fmt.Sprintf("http://%s/text/%d", h, size)
}

// serveText serves a /text/ path; false if the path is not one.
func serveText(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/text/")
	if !ok {
		return false
	}
	size, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || size < 1 || size > 64<<20 {
		http.NotFound(w, r)
		return true
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	chunk := []byte(strings.Repeat("a", 4096))
	for left := size; left > 0; {
		n := min(left, int64(len(chunk)))
		if _, err := w.Write(chunk[:n]); err != nil {
			return true
		}
		left -= n
	}
	return true
}

// TextBody is the body TextURL serves.
func TextBody(size int64) []byte {
	return bytes.Repeat([]byte("a"), int(size))
}
