package engine_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestBodiesGzip: with ResultBodyEncoding=gzip the inline limit counts the
// bytes as sent, so a binary body whose base64 was over it but that
// compresses stays inline, while random bytes, which do not shrink, still
// go to the store; with plain, the same binary body is stored.
func TestBodiesGzip(t *testing.T) {
	t.Parallel()
	const inline = 16 << 10
	binary := bytes.Repeat([]byte{0xff, 0x00, 0x80}, 4<<10+1) // 16 KiB and 4 bytes as base64
	noise := make([]byte, 13<<10)                             // 17.3 KiB as base64
	_, _ = rand.Read(noise)
	pages := map[string][]byte{"/bin": binary, "/noise": noise}
	for _, tt := range []struct {
		enc                    params.BodyEncoding
		binStored, noiseStored bool
		binEncoding            string
	}{
		{params.BodyPlain, true, true, ""},
		{params.BodyGzip, false, true, result.EncodingGzipBase64},
	} {
		t.Run(string(tt.enc), func(t *testing.T) {
			t.Parallel()
			s := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-test")
				_, _ = w.Write(pages[r.URL.Path])
			}))
			p := testParams()
			p.InlineBodyBytes = inline
			p.ResultBodyEncoding = tt.enc
			p.FetchDelay = 50 * time.Millisecond
			e := newEnv(t, p)
			store, err := dirbody.New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			eng := e.engine()
			eng.Bodies = store
			e.seed(s.url("/bin"), s.url("/noise"))
			e.runWith(eng, "owner", 20*time.Second, 0, e.pub.has(2))
			for path, stored := range map[string]bool{"/bin": tt.binStored, "/noise": tt.noiseStored} {
				res := e.pub.one(t, s.url(path))
				if res.Status != result.StatusFetched || (res.Body != nil) != stored {
					t.Errorf("%s: %s, body %+v: want stored=%v", path, res.Status, res.Body, stored)
				}
				if path == "/bin" && !stored && (res.Encoding != tt.binEncoding || int64(len(res.Data)) > inline) {
					t.Errorf("/bin: encoding %q with %d bytes of data, want %q within %d", res.Encoding, len(res.Data), tt.binEncoding, inline)
				}
				got, err := wholebody.Reader{}.ReadAll(t.Context(), res)
				if err != nil || !bytes.Equal(got, pages[path]) {
					t.Errorf("%s: read back %d bytes (%v), want the %d fetched", path, len(got), err, len(pages[path]))
				}
			}
		})
	}
}
