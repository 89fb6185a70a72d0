// Package handlers is the servers' view of the job handlers nodes offer:
// it reads the descriptions (name, version, description, params JSON
// Schema) every node publishes at cluster.Keys.Handler(name, node), merges
// them per handler, and validates a job's params against a handler's
// schema.
//
// Schemas come from nodes, so they are compiled without any remote loader
// ($ref to an http URL fails to compile instead of being fetched), and a
// schema that does not compile is reported as such, never trusted as
// "anything goes" silently.
package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/cronix/cronix/cluster"
)

// Handler is one handler as offered by the live nodes.
type Handler struct {
	// Name is what a job puts in "handler".
	Name string
	// Version, Description and ParamsSchema are those of the newest
	// version any node offers.
	Version      string
	Description  string
	ParamsSchema json.RawMessage
	// Nodes are the uuids of the nodes offering the handler (any version),
	// sorted.
	Nodes []string
}

// Descriptions reads every published handler description, in key order
// (by name, then node). Undecodable values are logged and skipped.
func Descriptions(ctx context.Context, kv clientv3.KV, keys cluster.Keys, log *slog.Logger) ([]cluster.HandlerInfo, error) {
	resp, err := kv.Get(ctx, keys.HandlerPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read handlers from etcd: %w", err)
	}
	out := make([]cluster.HandlerInfo, 0, len(resp.Kvs))
	for _, item := range resp.Kvs {
		var h cluster.HandlerInfo
		if err := json.Unmarshal(item.Value, &h); err != nil || h.Name == "" {
			if log != nil {
				log.WarnContext(ctx, "skipping undecodable handler description", slog.String("key", string(item.Key)), slog.Any("error", err))
			}
			continue
		}
		if h.Node == "" {
			h.Node = cluster.LastSegment(string(item.Key))
		}
		out = append(out, h)
	}
	return out, nil
}

// Merge groups descriptions by handler name (sorted by name); each takes
// the newest version's description and schema.
func Merge(descs []cluster.HandlerInfo) []Handler {
	byName := map[string]*Handler{}
	for _, d := range descs {
		h, ok := byName[d.Name]
		if !ok {
			h = &Handler{Name: d.Name}
			byName[d.Name] = h
		}
		if !slices.Contains(h.Nodes, d.Node) {
			h.Nodes = append(h.Nodes, d.Node)
		}
		if !ok || CompareVersions(d.Version, h.Version) > 0 {
			h.Version, h.Description, h.ParamsSchema = d.Version, d.Description, d.ParamsSchema
		}
	}
	out := make([]Handler, 0, len(byName))
	for _, h := range byName {
		slices.Sort(h.Nodes)
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b Handler) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// CompareVersions compares dotted versions ("1.10.0" > "1.9.2") numerically
// where both parts are numbers, else as strings; a leading "v" is ignored.
func CompareVersions(a, b string) int {
	pa := strings.Split(strings.TrimPrefix(a, "v"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		x, y := "0", "0" // a missing part counts as 0: 1.0 == 1.0.0
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.Atoi(x)
		ny, ey := strconv.Atoi(y)
		var c int
		if ex == nil && ey == nil {
			c = nx - ny
		} else {
			c = strings.Compare(x, y)
		}
		if c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ParamsError is a job's params not matching a handler's schema.
type ParamsError struct {
	// Path is the JSON pointer of the offending value ("" = the params object).
	Path string
	// Message says what is wrong with it.
	Message string
}

func (e *ParamsError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// SchemaError is a handler schema that does not compile.
type SchemaError struct{ Err error }

func (e *SchemaError) Error() string {
	return "handler params schema does not compile: " + e.Err.Error()
}
func (e *SchemaError) Unwrap() error { return e.Err }

var printer = message.NewPrinter(language.English)

// Compile compiles a params JSON Schema (draft 2020-12 unless it names
// another draft in $schema). Remote references are not fetched.
func Compile(schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, &SchemaError{Err: err}
	}
	sum := sha256.Sum256(schema)
	url := fmt.Sprintf("urn:cronix:handler-schema:%x", sum[:8])
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, &SchemaError{Err: err}
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, &SchemaError{Err: err}
	}
	return sch, nil
}

// noLoader refuses to load any external schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading external schema %q is not allowed", url)
}

// ValidateParams checks params against schema: nil when they match, a
// *ParamsError naming the first offending value when not, a *SchemaError
// when the schema itself is broken.
func ValidateParams(schema, params json.RawMessage) error {
	sch, err := Compile(schema)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &ParamsError{Message: "params are not valid JSON"}
	}
	verr := sch.Validate(inst)
	if verr == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return &ParamsError{Message: verr.Error()}
	}
	leaf := firstLeaf(ve)
	path := ""
	if len(leaf.InstanceLocation) > 0 {
		path = "/" + strings.Join(leaf.InstanceLocation, "/")
	}
	return &ParamsError{Path: path, Message: leaf.ErrorKind.LocalizedString(printer)}
}

// firstLeaf is the deepest first cause: the most specific problem.
func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}
