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
package stack

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
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

// Template is a parsed SAM template. CloudFormation's short tags (!Ref,
// !Sub, !GetAtt, ...) are turned into their long forms ({"Ref": ...},
// {"Fn::Sub": ...}), so values are plain maps, lists and scalars.
type Template struct {
	// Path is the file the template was loaded from.
	Path string

	text       []byte // the file, comments included
	params     map[string]Parameter
	paramOrder []string
	conditions map[string]any
	globals    map[string]any
	resources  map[string]resource
	order      []string // resource logical ids in file order
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

// FindTemplate returns the path of template.yaml in the module root: the
// nearest directory at or above the working directory that holds go.mod.
// Tests run in their package's directory, so they find it too.
func FindTemplate() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", TemplateFile, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, TemplateFile)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("find %s: %w", TemplateFile, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find %s: no go.mod in the working directory or above it", TemplateFile)
		}
		dir = parent
	}
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

// Parse parses a template's YAML text.
func Parse(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("empty template")
	}
	root, err := fromNode(doc.Content[0])
	if err != nil {
		return nil, err
	}
	top, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("template is not a mapping")
	}
	t := &Template{
		text:       data,
		params:     map[string]Parameter{},
		conditions: mapOf(top["Conditions"]),
		globals:    mapOf(top["Globals"]),
		resources:  map[string]resource{},
	}
	// Keys in file order, for a deterministic deployment order.
	order := keyOrder(doc.Content[0])
	for _, name := range order["Parameters"] {
		p, err := parseParameter(name, mapOf(mapOf(top["Parameters"])[name]))
		if err != nil {
			return nil, err
		}
		t.params[name] = p
		t.paramOrder = append(t.paramOrder, name)
	}
	for _, id := range order["Resources"] {
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

// keyOrder returns, for each top-level section that is a mapping, its keys
// in file order.
func keyOrder(root *yaml.Node) map[string][]string {
	out := map[string][]string{}
	if root.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		sec := root.Content[i+1]
		if sec.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(sec.Content); j += 2 {
			out[root.Content[i].Value] = append(out[root.Content[i].Value], sec.Content[j].Value)
		}
	}
	return out
}

// fromNode converts a YAML node to maps, lists and scalars, turning short
// tags into CloudFormation's long form: !Ref X is {"Ref": "X"}, !Condition
// X is {"Condition": "X"}, !GetAtt A.B is {"Fn::GetAtt": ["A", "B"]} and
// any other !Name v is {"Fn::Name": v}.
func fromNode(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromNode(n.Content[0])
	case yaml.AliasNode:
		return fromNode(n.Alias)
	}
	short := strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")
	var v any
	switch n.Kind {
	case yaml.ScalarNode:
		if short {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			x, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			list = append(list, x)
		}
		v = list
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", n.Content[i].Line, k)
			}
			x, err := fromNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		v = m
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	if !short {
		return v, nil
	}
	switch tag := strings.TrimPrefix(n.Tag, "!"); tag {
	case "Ref", "Condition":
		return map[string]any{tag: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q: want Resource.Attribute", n.Line, s)
			}
			v = []any{res, attr}
		}
		return map[string]any{"Fn::GetAtt": v}, nil
	default:
		return map[string]any{"Fn::" + tag: v}, nil
	}
}
