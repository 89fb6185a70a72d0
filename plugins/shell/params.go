package shell

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/plugins/internal/proc"
)

// Params are the shell handler's job params.
type Params struct {
	// Script is the script's source. Required.
	Script string `json:"script"`
	// Interpreter runs the script: "sh" (the default), "bash", "python3",
	// or an absolute path to an interpreter that takes the script's file
	// as its first argument.
	Interpreter string `json:"interpreter,omitempty"`
	// Env holds extra environment variables for the script. The CRONIX_*
	// variables of the run override same-named entries.
	Env map[string]string `json:"env,omitempty"`
}

// namedInterpreters are the interpreters allowed by name (looked up in the
// plugin's PATH); any absolute path is allowed too.
var namedInterpreters = []string{"sh", "bash", "python3"}

// paramsSchema is the JSON Schema of Params.
const paramsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Shell script",
  "x-cronix-i18n": {"zh-CN": {"title": "Shell 脚本", "handler_description": "用 sh、bash、python3 或其他解释器运行脚本；退出码 0 表示成功。"}},
  "type": "object",
  "properties": {
    "script": {
      "type": "string",
      "title": "Script",
      "description": "The script to run. Its stdout and stderr are the run's output; exit code 0 is success.",
      "minLength": 1,
      "x-cronix-widget": "code",
      "x-cronix-i18n": {"zh-CN": {"title": "脚本", "description": "要运行的脚本。其标准输出和标准错误即运行的输出；退出码 0 表示成功。"}}
    },
    "interpreter": {
      "type": "string",
      "title": "Interpreter",
      "description": "sh, bash, python3, or an absolute path to an interpreter that takes the script file as its argument.",
      "default": "sh",
      "x-cronix-i18n": {"zh-CN": {"title": "解释器", "description": "sh、bash、python3，或一个以脚本文件为参数的解释器的绝对路径。"}},
      "anyOf": [
        {"enum": ["sh", "bash", "python3"]},
        {"pattern": "^/"}
      ]
    },
    "env": {
      "type": "object",
      "title": "Environment",
      "description": "Extra environment variables for the script. CRONIX_FIRE_ID, CRONIX_JOB_ID, CRONIX_JOB_NAME, CRONIX_SCHEDULED_AT, CRONIX_ATTEMPT, CRONIX_SHARD_INDEX and CRONIX_SHARD_TOTAL are always set.",
      "x-cronix-i18n": {"zh-CN": {"title": "环境变量", "description": "脚本的额外环境变量。CRONIX_FIRE_ID、CRONIX_JOB_ID、CRONIX_JOB_NAME、CRONIX_SCHEDULED_AT、CRONIX_ATTEMPT、CRONIX_SHARD_INDEX 和 CRONIX_SHARD_TOTAL 总会设置。"}},
      "additionalProperties": {"type": "string"},
      "propertyNames": {"pattern": "^[^=\u0000]+$"}
    }
  },
  "required": ["script"],
  "additionalProperties": false
}`

// parseParams decodes and validates raw params, reporting the first
// offending field as a pluginapi.InvalidParams error.
func parseParams(raw json.RawMessage) (Params, error) {
	var fields map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return Params{}, pluginapi.InvalidParams("", "params must be a JSON object")
		}
	}
	var p Params
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := fields[k]
		switch k {
		case "script":
			if err := json.Unmarshal(v, &p.Script); err != nil {
				return Params{}, pluginapi.InvalidParams("script", "must be a string")
			}
		case "interpreter":
			if err := json.Unmarshal(v, &p.Interpreter); err != nil {
				return Params{}, pluginapi.InvalidParams("interpreter", "must be a string")
			}
		case "env":
			if err := json.Unmarshal(v, &p.Env); err != nil {
				return Params{}, pluginapi.InvalidParams("env", "must be an object whose values are strings")
			}
		default:
			return Params{}, pluginapi.InvalidParams(k, "unknown field (allowed: script, interpreter, env)")
		}
	}
	if strings.TrimSpace(p.Script) == "" {
		return Params{}, pluginapi.InvalidParams("script", "must not be empty")
	}
	if strings.ContainsRune(p.Script, 0) {
		return Params{}, pluginapi.InvalidParams("script", "must not contain NUL bytes")
	}
	if p.Interpreter != "" && !slices.Contains(namedInterpreters, p.Interpreter) && !filepath.IsAbs(p.Interpreter) {
		return Params{}, pluginapi.InvalidParams("interpreter",
			fmt.Sprintf(`%q is not allowed: use "sh", "bash", "python3" or an absolute path`, p.Interpreter))
	}
	if err := proc.CheckEnv(p.Env); err != nil {
		return Params{}, err
	}
	return p, nil
}
