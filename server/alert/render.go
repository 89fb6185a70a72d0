package alert

import (
	"fmt"
	"html"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/server/store"
)

// subject is the mail subject of an event, e.g. "[Cronix] backup failed on node-1".
func subject(lang string, ev *store.AlertEvent) string {
	job := ev.JobName
	if job == "" && ev.JobID != 0 {
		job = "job " + strconv.FormatInt(ev.JobID, 10)
	}
	node := ev.Node
	if node == "" {
		node = "-"
	}
	zh := lang == LangZhCN
	var s string
	switch ev.Kind {
	case KindRunFailed:
		s = pick(zh, fmt.Sprintf("%s failed on %s", job, node), fmt.Sprintf("%s 在 %s 上执行失败", job, node))
	case KindRunTimeout:
		s = pick(zh, fmt.Sprintf("%s timed out on %s", job, node), fmt.Sprintf("%s 在 %s 上执行超时", job, node))
	case KindRunLost:
		s = pick(zh, fmt.Sprintf("%s lost on %s", job, node), fmt.Sprintf("%s 在 %s 上丢失", job, node))
	case KindRunKilled:
		s = pick(zh, fmt.Sprintf("%s killed on %s", job, node), fmt.Sprintf("%s 在 %s 上被终止", job, node))
	case KindScheduleMissed:
		s = pick(zh, fmt.Sprintf("%s missed its schedule", job), fmt.Sprintf("%s 未按计划触发", job))
	case KindJobRecovered:
		s = pick(zh, fmt.Sprintf("%s recovered on %s", job, node), fmt.Sprintf("%s 在 %s 上已恢复", job, node))
	case KindNodeDown:
		s = pick(zh, fmt.Sprintf("node %s is down", node), fmt.Sprintf("节点 %s 已下线", node))
	case KindClusterNoLeader:
		s = pick(zh, "the cluster has no leader", "集群没有 leader")
	case KindSecurity:
		s = pick(zh, "security event on "+node, node+" 上的安全事件")
	case KindTest:
		s = pick(zh, "test alert", "测试告警")
	default:
		s = ev.Kind
	}
	return "[Cronix] " + s
}

func pick(zh bool, en, cn string) string {
	if zh {
		return cn
	}
	return en
}

// field is one labelled line of a message.
type field struct{ label, value string }

// fields are the event's details, labelled in lang.
func fields(lang string, ev *store.AlertEvent) []field {
	zh := lang == LangZhCN
	var out []field
	add := func(en, cn, v string) {
		if v != "" {
			out = append(out, field{pick(zh, en, cn), v})
		}
	}
	add("Event", "事件", ev.Kind)
	if ev.JobID != 0 {
		add("Job", "任务", fmt.Sprintf("%s (#%d)", ev.JobName, ev.JobID))
	}
	add("Group", "执行器", ev.Group)
	add("Node", "节点", ev.Node)
	if ev.RunID != 0 {
		add("Run", "执行记录", fmt.Sprintf("#%d (%s)", ev.RunID, ev.FireID))
	}
	add("Status", "状态", ev.RunStatus)
	if ev.ExitCode != nil {
		add("Exit code", "退出码", strconv.Itoa(*ev.ExitCode))
	}
	add("Time", "时间", ev.OccurredAt.UTC().Format(time.RFC3339))
	add("Message", "信息", ev.Message)
	if ev.SuppressedCount > 0 {
		add("Suppressed", "已抑制", pick(zh,
			fmt.Sprintf("%d similar alerts of this job were suppressed since the last one", ev.SuppressedCount),
			fmt.Sprintf("自上次告警以来，该任务有 %d 条告警被抑制", ev.SuppressedCount)))
	}
	add("Link", "链接", ev.Link)
	return out
}

// textBody is the plain-text mail body.
func textBody(lang string, ev *store.AlertEvent) string {
	var b strings.Builder
	for _, f := range fields(lang, ev) {
		fmt.Fprintf(&b, "%s: %s\n", f.label, f.value)
	}
	if ev.OutputTail != "" {
		fmt.Fprintf(&b, "\n%s:\n%s\n", pick(lang == LangZhCN, "Output (tail)", "输出（末尾）"), ev.OutputTail)
	}
	return b.String()
}

// htmlBody is the HTML mail body.
func htmlBody(lang string, ev *store.AlertEvent) string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><body><table>")
	for _, f := range fields(lang, ev) {
		v := html.EscapeString(f.value)
		if f.value == ev.Link {
			v = `<a href="` + html.EscapeString(ev.Link) + `">` + v + `</a>`
		}
		fmt.Fprintf(&b, "<tr><th align=\"left\">%s</th><td>%s</td></tr>", html.EscapeString(f.label), v)
	}
	b.WriteString("</table>")
	if ev.OutputTail != "" {
		fmt.Fprintf(&b, "<h4>%s</h4><pre>%s</pre>", html.EscapeString(pick(lang == LangZhCN, "Output (tail)", "输出（末尾）")),
			html.EscapeString(ev.OutputTail))
	}
	b.WriteString("</body></html>")
	return b.String()
}
