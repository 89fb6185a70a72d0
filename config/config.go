// Package config reads Cronix configuration in one place: defaults, then an
// optional YAML file, then CRONIX_* environment variables, then command-line
// flags — each later source overriding the earlier ones.
//
// A configuration is a plain struct whose fields carry tags:
//
//	DataDir string `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"where data is kept"`
//
// Supported field types: string, bool, int, int64, float64, time.Duration
// and []string (comma-separated in flags and environment).
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Load fills cfg (a pointer to a tagged struct holding its defaults) from the
// YAML file named by --config / CRONIX_CONFIG, the environment and args.
// It returns flag.ErrHelp after printing usage when -h/--help is given.
func Load(cfg any, name, summary string, args []string, getenv func(string) string, out io.Writer) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return errors.New("config: Load needs a pointer to a struct")
	}
	fields := collect(v.Elem())
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	configFile := getenv("CRONIX_CONFIG")
	fs.StringVar(&configFile, "config", configFile, "optional YAML configuration file (env CRONIX_CONFIG)")
	given := map[string]*rawValue{}
	for _, f := range fields {
		_, isBool := f.v.Interface().(bool)
		rv := &rawValue{isBool: isBool}
		given[f.flag] = rv
		fs.Var(rv, f.flag, f.usage()) // applied below, after the file and the environment
	}
	fs.Usage = func() { usage(out, name, summary, fields) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if configFile != "" {
		if err := loadYAML(configFile, fields); err != nil {
			return err
		}
	}
	for _, f := range fields {
		if f.env == "" {
			continue
		}
		if s, ok := lookup(getenv, f.env); ok {
			if err := f.set(s); err != nil {
				return fmt.Errorf("environment %s: %w", f.env, err)
			}
		}
	}
	var ferr error
	fs.Visit(func(fl *flag.Flag) {
		if ferr != nil || fl.Name == "config" {
			return
		}
		for _, f := range fields {
			if f.flag == fl.Name {
				if err := f.set(given[f.flag].s); err != nil {
					ferr = fmt.Errorf("flag --%s: %w", fl.Name, err)
				}
			}
		}
	})
	return ferr
}

// rawValue keeps a flag's text until it is applied in precedence order.
type rawValue struct {
	s      string
	isBool bool
}

// IsBoolFlag lets "--flag" alone mean true for bool fields.
func (r *rawValue) IsBoolFlag() bool { return r.isBool }

func (r *rawValue) String() string     { return r.s }
func (r *rawValue) Set(s string) error { r.s = s; return nil }

func lookup(getenv func(string) string, key string) (string, bool) {
	s := getenv(key)
	return s, s != ""
}

type field struct {
	flag, env, yaml, help string
	def                   string
	v                     reflect.Value
}

func (f field) usage() string {
	u := f.help
	if f.env != "" {
		u += " (env " + f.env + ")"
	}
	return u
}

func collect(v reflect.Value) []field {
	var out []field
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		fv := v.Field(i)
		if sf.Anonymous && fv.Kind() == reflect.Struct {
			out = append(out, collect(fv)...)
			continue
		}
		name := sf.Tag.Get("flag")
		if name == "" {
			continue
		}
		out = append(out, field{
			flag: name, env: sf.Tag.Get("env"), yaml: sf.Tag.Get("yaml"), help: sf.Tag.Get("help"),
			def: format(fv), v: fv,
		})
	}
	return out
}

func format(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

func (f field) set(s string) error {
	switch f.v.Interface().(type) {
	case string:
		f.v.SetString(s)
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		f.v.SetBool(b)
	case int, int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		f.v.SetInt(n)
	case float64:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		f.v.SetFloat(n)
	case time.Duration:
		d, err := parseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration like 10s or 30d", s)
		}
		f.v.SetInt(int64(d))
	case []string:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("config: unsupported field type %s", f.v.Type())
	}
	return nil
}

func loadYAML(path string, fields []field) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]yaml.Node
	if err := yaml.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	known := map[string]field{}
	for _, f := range fields {
		known[f.yaml] = f
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := known[k]
		if !ok || k == "" {
			return fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		n := m[k]
		var s string
		if n.Kind == yaml.SequenceNode {
			var list []string
			if err := n.Decode(&list); err != nil {
				return fmt.Errorf("config file %s: %s: %w", path, k, err)
			}
			s = strings.Join(list, ",")
		} else {
			s = n.Value
		}
		if err := f.set(s); err != nil {
			return fmt.Errorf("config file %s: %s: %w", path, k, err)
		}
	}
	return nil
}

func usage(out io.Writer, name, summary string, fields []field) {
	fmt.Fprintf(out, "Usage: cronix %s [flags]\n\n%s\n\nFlags (each also settable by its environment variable or YAML key in --config):\n", name, summary)
	fmt.Fprintf(out, "  --config FILE\n        optional YAML configuration file (env CRONIX_CONFIG)\n")
	for _, f := range fields {
		fmt.Fprintf(out, "  --%s", f.flag)
		if f.def != "" && f.def != "false" && f.def != "0" && f.def != "0s" {
			fmt.Fprintf(out, " (default %s)", f.def)
		}
		fmt.Fprintf(out, "\n        %s\n", f.help)
		var src []string
		if f.env != "" {
			src = append(src, "env "+f.env)
		}
		if f.yaml != "" {
			src = append(src, "yaml "+f.yaml)
		}
		if len(src) > 0 {
			fmt.Fprintf(out, "        [%s]\n", strings.Join(src, ", "))
		}
	}
}

// Markdown renders the options of cfg as a Markdown table (for docs/configuration.md).
func Markdown(cfg any) string {
	fields := collect(reflect.ValueOf(cfg).Elem())
	var b strings.Builder
	b.WriteString("| flag | environment | YAML key | default | meaning |\n|---|---|---|---|---|\n")
	for _, f := range fields {
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | `%s` | %s |\n", f.flag, f.env, f.yaml, f.def, f.help)
	}
	return b.String()
}

// parseDuration is time.ParseDuration that also takes whole days: "30d".
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
