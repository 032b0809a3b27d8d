// Package stack creates, on moto (or any endpoint that speaks the AWS
// APIs), the DynamoDB table and SQS queues that template.yaml declares,
// sets the runtime parameters a caller overrides (the stack owns none: see
// the template), and tells the local pipeline what the template says about
// the functions: their environment, the SQS event source mapping of ingest
// and the check schedules.
//
// Everything is read from the template file itself, so the local stack and
// the deployed one cannot drift apart: a property this package does not
// know makes Deploy fail rather than be silently dropped.
//
// The template is first translated into plain CloudFormation by the SAM
// translator (samtranslator, installed with the SAM CLI in .venv; see
// internal/stack/sam-translate.py), the code `sam deploy` runs in the
// cloud: it parses the YAML, merges Globals into each function and expands
// every AWS::Serverless::* resource (a function's SQS events into
// AWS::Lambda::EventSourceMapping, its Schedule events into
// AWS::Events::Rule). This package keeps by hand only what no tool here
// does for a local stack: it evaluates CloudFormation's intrinsic functions
// and conditions for one deployment's parameters (eval.go; neither the
// translator nor cfn-lint evaluates them, and moto's own CloudFormation
// cannot take this template: see internal/moto/NOTES.md), and it creates the
// tables and queues with the SDK under names of its own and reads what the
// local pipeline needs (deploy.go).
package stack

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// The logical ids of template.yaml that the Go code relies on.
const (
	HostsTable     = "HostsTable"
	InputQueue     = "InputQueue"
	InputDLQ       = "InputDLQ"
	OutputQueue    = "OutputQueue"
	BodyBucket     = "BodyBucket"
	IngestFunction = "IngestFunction"
	CheckFunction  = "CheckFunction"
)

// TemplateFile is the template's name in the module root.
const TemplateFile = "template.yaml"

// Template is a SAM template translated into plain CloudFormation by the
// SAM translator. CloudFormation's short tags (!Ref, !Sub, !GetAtt, ...)
// are in their long forms ({"Ref": ...}, {"Fn::Sub": ...}), so values are
// plain maps, lists and scalars; the resources are the translator's
// (IngestFunction is an AWS::Lambda::Function, its SQS event the
// AWS::Lambda::EventSourceMapping IngestFunctionInputQueue).
type Template struct {
	// Path is the file the template was loaded from.
	Path string

	text       []byte         // the file, comments included
	doc        map[string]any // the translated template
	params     map[string]Parameter
	paramOrder []string
	conditions map[string]any
	mappings   map[string]any // Fn::FindInMap's tables
	rules      map[string]any // checked by resolveParams (rules.go)
	resources  map[string]resource
	order      []string // resource logical ids in the translator's order
}

// Parameter is one entry of the template's Parameters section.
type Parameter struct {
	Name           string
	Type           string
	Default        string
	HasDefault     bool
	AllowedPattern string
	AllowedValues  []string
	MinValue       *float64
	MaxValue       *float64
}

type resource struct {
	ID         string
	Type       string
	Condition  string
	Properties map[string]any
	DependsOn  []string
	// DeletionPolicy and UpdateReplacePolicy are the resource attributes
	// (nil when absent), intrinsic functions unevaluated: no local meaning,
	// kept for the template's tests.
	DeletionPolicy, UpdateReplacePolicy any
}

// FindTemplate returns the path of template.yaml in the module root (see
// proc.ModuleRoot). Tests run in their package's directory, so they find
// it too.
func FindTemplate() (string, error) {
	root, err := proc.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", TemplateFile, err)
	}
	return filepath.Join(root, TemplateFile), nil
}

// Load reads and parses the template at path; an empty path means
// FindTemplate's.
func Load(path string) (*Template, error) {
	if path == "" {
		p, err := FindTemplate()
		if err != nil {
			return nil, err
		}
		path = p
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load template: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// Parse translates a template's YAML text (see the package comment) and
// reads the result. A template without SAM's transform is read as
// parsed. Translations are cached for the process, by text.
func Parse(data []byte) (*Template, error) {
	tr, err := translate(data)
	if err != nil {
		return nil, err
	}
	top := tr.Template
	t := &Template{
		text:       data,
		doc:        top,
		params:     map[string]Parameter{},
		conditions: mapOf(top["Conditions"]),
		mappings:   mapOf(top["Mappings"]),
		rules:      mapOf(top["Rules"]),
		resources:  map[string]resource{},
	}
	for _, name := range tr.ParameterOrder {
		p, err := parseParameter(name, mapOf(mapOf(top["Parameters"])[name]))
		if err != nil {
			return nil, err
		}
		t.params[name] = p
		t.paramOrder = append(t.paramOrder, name)
	}
	for _, id := range tr.ResourceOrder {
		r := mapOf(mapOf(top["Resources"])[id])
		typ, _ := r["Type"].(string)
		if typ == "" {
			return nil, fmt.Errorf("resource %s has no Type", id)
		}
		cond, _ := r["Condition"].(string)
		var deps []string
		switch d := r["DependsOn"].(type) {
		case string:
			deps = []string{d}
		case []any:
			for _, x := range d {
				deps = append(deps, fmt.Sprint(x))
			}
		}
		t.resources[id] = resource{ID: id, Type: typ, Condition: cond, Properties: mapOf(r["Properties"]), DependsOn: deps,
			DeletionPolicy: r["DeletionPolicy"], UpdateReplacePolicy: r["UpdateReplacePolicy"]}
		t.order = append(t.order, id)
	}
	if len(t.resources) == 0 {
		return nil, errors.New("template has no Resources")
	}
	return t, nil
}

// translation is what internal/stack/sam-translate.py prints.
type translation struct {
	Template       map[string]any `json:"template"`
	ResourceOrder  []string       `json:"resourceOrder"`
	ParameterOrder []string       `json:"parameterOrder"`
}

// The translator's Python takes about a second of CPU to start; every
// test binary loads the template at least once, many tests more often. So
// translations are kept for the process, by text, and on disk (see
// cachedTranslation) across processes.
var translations struct {
	sync.Mutex
	byText map[[sha256.Size]byte][]byte
}

// EnvPython names the Python that runs the SAM translator; unset means
// .venv/bin/python in the module root, where `make tools` installs it.
const EnvPython = "SAM_TRANSLATOR_PYTHON"

func translate(data []byte) (*translation, error) {
	key := sha256.Sum256(data)
	translations.Lock()
	out, ok := translations.byText[key]
	translations.Unlock()
	if !ok {
		var err error
		if out, err = runTranslator(data); err != nil {
			return nil, fmt.Errorf("translate template: %w", err)
		}
		translations.Lock()
		if translations.byText == nil {
			translations.byText = map[[sha256.Size]byte][]byte{}
		}
		translations.byText[key] = out
		translations.Unlock()
	}
	var tr translation
	if err := json.Unmarshal(out, &tr); err != nil {
		return nil, fmt.Errorf("translate template: read the translator's output: %w", err)
	}
	return &tr, nil
}

// runTranslator returns what internal/stack/sam-translate.py prints for
// data, from the disk cache when it holds it.
func runTranslator(data []byte) ([]byte, error) {
	root, err := proc.ModuleRoot()
	if err != nil {
		return nil, err
	}
	python, err := proc.FindTool(EnvPython, ".venv/bin/python")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(root, "internal", "stack", "sam-translate.py")
	cached := cachedTranslation(data, script, python)
	if out, err := os.ReadFile(cached); cached != "" && err == nil {
		return out, nil
	}
	cmd := exec.Command(python, script, "-")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if cached != "" {
		// Best effort, written whole or not at all: a cache that cannot
		// be written only costs the next process a second.
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
			if f, err := os.CreateTemp(filepath.Dir(cached), "tmp-*"); err == nil {
				_, werr := f.Write(out)
				if cerr := f.Close(); werr == nil && cerr == nil {
					werr = os.Rename(f.Name(), cached)
				}
				if werr != nil {
					os.Remove(f.Name())
				}
			}
		}
	}
	return out, nil
}

// cachedTranslation returns the file in the user's cache folder that holds
// the translation of data, named by a hash of everything the output
// depends on: the template, the script, and the translator's version (its
// package's __init__.py in the virtualenv of python). "" when the
// translator's files are not found, or there is no cache folder: then
// nothing is cached on disk.
func cachedTranslation(data []byte, script, python string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	code, err := os.ReadFile(script)
	if err != nil {
		return ""
	}
	inits, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(python)), "lib", "python*", "site-packages", "samtranslator", "__init__.py"))
	if len(inits) != 1 {
		return ""
	}
	version, err := os.ReadFile(inits[0])
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, part := range [][]byte{data, code, []byte(python), version} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return filepath.Join(dir, "urldownloader", "sam-translate", fmt.Sprintf("%x.json", h.Sum(nil)))
}

// Lookup returns the translated template's value at a path of keys, e.g.
// "Resources", "CheckFunctionWake", "Properties", "BatchSize", with
// intrinsic functions unevaluated ({"Ref": "IngestBatchSize"}); nil if
// there is none. Resource ids are the translator's: a SAM function's event
// E is the resource <Function><E>.
func (t *Template) Lookup(keys ...string) any {
	var v any = t.doc
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Parameters returns the template's parameters in file order.
func (t *Template) Parameters() []Parameter {
	out := make([]Parameter, 0, len(t.paramOrder))
	for _, name := range t.paramOrder {
		out = append(out, t.params[name])
	}
	return out
}

// DocParam is one runtime parameter as the template's comments document it.
type DocParam struct {
	Name, Default, Meaning string
}

// The runtime parameters' documentation in template.yaml: one comment
// line each, "Name [default] Meaning", between the markers.
const (
	docBegin = "# BEGIN runtime parameters"
	docEnd   = "# END runtime parameters"
)

var docLine = regexp.MustCompile(`^#\s+([A-Za-z]+) \[([^\]]*)\] (\S.*)$`)

// DocumentedParams returns the runtime parameters that the template's
// comments document, in their order. The stack creates none of them
// (operators set them in SSM; unset means the code's default), so the
// comments are where a reader of the template finds their names.
func (t *Template) DocumentedParams() ([]DocParam, error) {
	var out []DocParam
	in := false
	for i, line := range strings.Split(string(t.text), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == docBegin:
			in = true
		case line == docEnd:
			if !in {
				return nil, fmt.Errorf("line %d: %q before %q", i+1, docEnd, docBegin)
			}
			return out, nil
		case in:
			m := docLine.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: %q: want \"# Name [default] Meaning\"", i+1, line)
			}
			out = append(out, DocParam{Name: m[1], Default: m[2], Meaning: m[3]})
		}
	}
	return nil, fmt.Errorf("no %q ... %q block", docBegin, docEnd)
}

// resolveParams gives every parameter its value: an override, else the
// default, checked against the parameter's constraints as CloudFormation
// does.
func (t *Template) resolveParams(overrides map[string]string) (map[string]string, error) {
	for name := range overrides {
		if _, ok := t.params[name]; !ok {
			return nil, fmt.Errorf("parameter %s is not in the template", name)
		}
	}
	out := map[string]string{}
	var errs []error
	for _, name := range t.paramOrder {
		p := t.params[name]
		v, ok := overrides[name]
		if !ok {
			if !p.HasDefault {
				errs = append(errs, fmt.Errorf("parameter %s has no default and no value", name))
				continue
			}
			v = p.Default
		}
		if err := p.Check(v); err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := t.checkRules(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Check reports whether v is a valid value of the parameter, by its Type,
// AllowedValues, AllowedPattern (which must match the whole value) and
// MinValue/MaxValue.
func (p Parameter) Check(v string) error {
	if p.Type == "Number" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) {
			return fmt.Errorf("parameter %s=%q: not a number", p.Name, v)
		}
		if p.MinValue != nil && f < *p.MinValue {
			return fmt.Errorf("parameter %s=%s: below MinValue %v", p.Name, v, *p.MinValue)
		}
		if p.MaxValue != nil && f > *p.MaxValue {
			return fmt.Errorf("parameter %s=%s: above MaxValue %v", p.Name, v, *p.MaxValue)
		}
	}
	if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, v) {
		return fmt.Errorf("parameter %s=%q: not one of %v", p.Name, v, p.AllowedValues)
	}
	if p.AllowedPattern != "" {
		re, err := regexp.Compile("^(?:" + p.AllowedPattern + ")$")
		if err != nil {
			return fmt.Errorf("parameter %s: AllowedPattern: %w", p.Name, err)
		}
		if !re.MatchString(v) {
			return fmt.Errorf("parameter %s=%q: does not match %s", p.Name, v, p.AllowedPattern)
		}
	}
	return nil
}

func parseParameter(name string, m map[string]any) (Parameter, error) {
	p := Parameter{Name: name}
	p.Type, _ = m["Type"].(string)
	if d, ok := m["Default"]; ok {
		p.Default, p.HasDefault = scalar(d), true
	}
	p.AllowedPattern, _ = m["AllowedPattern"].(string)
	if vs, ok := m["AllowedValues"].([]any); ok {
		for _, v := range vs {
			p.AllowedValues = append(p.AllowedValues, scalar(v))
		}
	}
	for key, dst := range map[string]**float64{"MinValue": &p.MinValue, "MaxValue": &p.MaxValue} {
		if v, ok := m[key]; ok {
			f, err := strconv.ParseFloat(scalar(v), 64)
			if err != nil {
				return p, fmt.Errorf("parameter %s: %s: %w", name, key, err)
			}
			*dst = &f
		}
	}
	return p, nil
}

// scalar renders a YAML scalar the way CloudFormation sees every
// parameter value and Ref: as a string.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}
