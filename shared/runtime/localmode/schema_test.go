package localmode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/schematest"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// TestResultSchema: every result of a real local job (fetched inline, as
// base64 and in the bodies folder, cut, not modified, denied, a 404, each
// with its WARC reference) is valid against docs/schema/result.schema.json,
// as is a result as the AWS backend writes it (S3 body and WARC segment);
// results broken on purpose are not.
func TestResultSchema(t *testing.T) {
	site := warcSite(t)
	dir := t.TempDir()
	opts := Options{
		State: filepath.Join(dir, "state.db"), OutPath: filepath.Join(dir, "out.jsonl"), Warc: filepath.Join(dir, "s.warc.gz"),
		Addresses: fetch.PrivatePolicy(),
		Params:    map[string]string{"FetchDelay": "20ms", "MaxBodyBytes": "50000", "InlineBodyBytes": "2048"},
	}
	lines := warcInput(site)
	for _, h := range site.Hosts() {
		lines = append(lines, jsonLines([]string{"http://" + h + "/missing", "http://" + h + "/binary"})...)
	}
	runWarcJob(t, opts, lines)
	raw, err := os.ReadFile(opts.OutPath)
	if err != nil {
		t.Fatal(err)
	}
	var instances [][]byte
	statuses := map[string]bool{}
	var stored, base64 bool
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		instances = append(instances, []byte(line))
		var r result.Result
		json.Unmarshal([]byte(line), &r)
		statuses[string(r.Status)] = true
		stored = stored || r.Body != nil
		base64 = base64 || r.Encoding == result.EncodingBase64
	}
	if len(statuses) != 4 || !stored || !base64 {
		t.Fatalf("the job's results cover statuses %v, stored %v, base64 %v: want fetched, not_modified, denied, fetch_error, a stored and a base64 body", statuses, stored, base64)
	}
	aws := `{"id":"a1","host":"example.com","url":"https://example.com/","status":"fetched","httpStatus":200,` +
		`"body":{"bucket":"b","key":"sha256/` + strings.Repeat("ab", 32) + `","bytes":300000,"sha256":"` + strings.Repeat("ab", 32) + `"},` +
		`"bytes":300000,"sha256":"` + strings.Repeat("ab", 32) + `","fetchedAt":"2026-12-01T10:00:00Z",` +
		`"warc":{"bucket":"b","key":"warc/s0-00000.warc.gz","offset":1234,"length":5678}}`
	inWarc := `{"id":"a2","host":"example.com","url":"https://example.com/big","status":"fetched","httpStatus":200,` +
		`"body":{"bytes":300000,"sha256":"` + strings.Repeat("ab", 32) + `"},"bytes":300000,"sha256":"` + strings.Repeat("ab", 32) + `",` +
		`"fetchedAt":"2026-12-01T10:00:00Z","warc":{"bucket":"b","key":"warc/s0-00000.warc.gz","offset":1234,"length":5678}}`
	redirected := `{"id":"a3","host":"example.com","url":"https://example.com/old","status":"not_modified","httpStatus":304,"bytes":0,` +
		`"fetchedAt":"2026-12-01T10:00:00Z","location":"https://example.com/new","etag":"\"v\"","validatorsUrl":"https://example.com/new"}`
	instances = append(instances, []byte(aws), []byte(inWarc), []byte(redirected))
	for i, errs := range schematest.Validate(t, schematest.Path(t, "result.schema.json"), instances) {
		if len(errs) > 0 {
			t.Errorf("result %s is not valid: %v", instances[i], errs)
		}
	}

	broken := []string{
		`{"host":"h","url":"http://h/","status":"fetched","bytes":0,"fetchedAt":"2026-12-01T10:00:00Z"}`,                                                                         // no id
		`{"id":"x","host":"h","url":"http://h/","status":"gone","bytes":0,"fetchedAt":"2026-12-01T10:00:00Z"}`,                                                                   // unknown status
		`{"id":"x","host":"h","url":"http://h/","status":"fetched","bytes":0,"fetchedAt":"yesterday"}`,                                                                           // not a date-time
		`{"id":"x","host":"h","url":"http://h/","status":"fetched","bytes":0,"fetchedAt":"2026-12-01T10:00:00Z","warc":{"offset":1,"length":2}}`,                                 // a warc ref naming no file
		`{"id":"x","host":"h","url":"http://h/","status":"fetched","bytes":0,"sha256":"XYZ","fetchedAt":"2026-12-01T10:00:00Z"}`,                                                 // not a sha256
		`{"id":"x","host":"h","url":"http://h/","status":"fetched","bytes":1,"fetchedAt":"2026-12-01T10:00:00Z","body":{"bytes":1,"sha256":"` + strings.Repeat("ab", 32) + `"}}`, // a body in no store and no record
	}
	var bad [][]byte
	for _, b := range broken {
		bad = append(bad, []byte(b))
	}
	for i, errs := range schematest.Validate(t, schematest.Path(t, "result.schema.json"), bad) {
		if len(errs) == 0 {
			t.Errorf("broken result %s passes the schema", broken[i])
		}
	}
}

// TestInputSchema: the input forms ingest accepts are valid against
// docs/schema/input.schema.json, and those it refuses whole are not.
func TestInputSchema(t *testing.T) {
	many := make([]string, urlmsg.MaxItems+1)
	for i := range many {
		many[i] = `"http://a.test/"`
	}
	cases := []struct {
		msg   string
		valid bool
	}{
		{`{"url":"http://a.test/x"}`, true},
		{`{"host":"a.test","url":"https://a.test/x","etag":"\"v1\"","lastModified":"Tue, 01 Dec 2026 10:00:00 GMT"}`, true},
		{`{"url":"http://a.test/x","etag":null}`, true},
		{`"http://a.test/bare"`, true},
		{`[{"url":"http://a.test/1"},"http://a.test/2"]`, true},
		{`{"url":"http://a.test/x","lastModfied":"x"}`, false},
		{`{"host":"a.test"}`, false},
		{`"ftp://a.test/"`, false},
		{`[]`, false},
		{`[` + strings.Join(many, ",") + `]`, false},
		{`{"url":"http://a.test/x","etag":"` + strings.Repeat("e", 513) + `"}`, false},
		{`{"url":"http://a.test/x","etag":"\"v\"","validatorsUrl":"http://a.test/y"}`, true},
		{`{"url":"http://a.test/x","lastModified":"Tue, 01 Dec 2026 10:00:00 GMT","validatorsUrl":"https://b.test/y"}`, true},
		{`{"url":"http://a.test/x","etag":"\"v\"","validatorsUrl":null}`, true},
		{`{"url":"http://a.test/x","validatorsUrl":"http://a.test/y"}`, false},
		{`{"url":"http://a.test/x","etag":"","validatorsUrl":"http://a.test/y"}`, false},
		{`{"url":"http://a.test/x","etag":"\"v\"","validatorsUrl":"ftp://a.test/y"}`, false},
		{`{"url":"http://a.test/x","etag":"\"v\"","validatorsUrl":1}`, false},
	}
	var instances [][]byte
	for _, c := range cases {
		instances = append(instances, []byte(c.msg))
		// The schema and ingest agree on every case.
		msgs, items, err := urlmsg.Parse("src", []byte(c.msg))
		if accepted := err == nil && len(items) == 0 && len(msgs) > 0; accepted != c.valid {
			t.Errorf("ingest on %.80s: %d accepted, item errors %v, error %v; the case says valid=%v", c.msg, len(msgs), items, err, c.valid)
		}
	}
	for i, errs := range schematest.Validate(t, schematest.Path(t, "input.schema.json"), instances) {
		if (len(errs) == 0) != cases[i].valid {
			t.Errorf("%.80s: schema errors %v, want valid=%v", cases[i].msg, errs, cases[i].valid)
		}
	}
}

// TestSchemasNameEveryField: the schemas' properties are exactly the Go
// types' JSON fields, so a field added to a message is added to its
// schema too.
func TestSchemasNameEveryField(t *testing.T) {
	load := func(name string) map[string]any {
		b, err := os.ReadFile(schematest.Path(t, name))
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	props := func(obj any) []string {
		p, _ := obj.(map[string]any)["properties"].(map[string]any)
		var names []string
		for k := range p {
			names = append(names, k)
		}
		slices.Sort(names)
		return names
	}
	res, in := load("result.schema.json"), load("input.schema.json")
	defs := res["$defs"].(map[string]any)
	inItem := in["$defs"].(map[string]any)["item"].(map[string]any)["oneOf"].([]any)[1]
	for _, c := range []struct {
		what   string
		schema any
		typ    any
	}{
		{"result", res, result.Result{}},
		{"result body", defs["bodyRef"], body.Ref{}},
		{"result warc", defs["warcRef"], warc.Ref{}},
		{"input item", inItem, urlmsg.Input{}},
	} {
		if got, want := props(c.schema), jsonFields(c.typ); !slices.Equal(got, want) {
			t.Errorf("%s: schema properties %v, Go fields %v", c.what, got, want)
		}
	}
}

func jsonFields(v any) []string {
	var names []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
