package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/store"
)

// maxReportDays bounds the from..to range of one report request.
const maxReportDays = 366

// reportRoutes registers GET /api/v1/reports/daily.
func (s *server) reportRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/reports/daily", s.user(MaxBodyBytes, s.dailyReport)).Methods(http.MethodGet)
}

// RunCounts are a report row's runs by status.
type RunCounts struct {
	Total   int `json:"total"`
	Success int `json:"success"`
	Failed  int `json:"failed"`
	Timeout int `json:"timeout"`
	Killed  int `json:"killed"`
	Lost    int `json:"lost"`
	Skipped int `json:"skipped"`
	// Unfinished counts runs still triggered or running.
	Unfinished int `json:"unfinished"`
}

// Percentiles are p50 and p99 in milliseconds over Count runs.
type Percentiles struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50"`
	P99   int64 `json:"p99"`
}

// DailyReport is one row of GET /api/v1/reports/daily: a job's runs
// scheduled on one UTC day.
type DailyReport struct {
	Day     string    `json:"day"`
	Group   string    `json:"group"`
	JobID   int64     `json:"job_id"`
	JobName string    `json:"job_name"`
	Runs    RunCounts `json:"runs"`
	// LatenessMs: scheduled -> started, scheduled fires that started.
	LatenessMs Percentiles `json:"lateness_ms"`
	// DurationMs: started -> finished.
	DurationMs Percentiles `json:"duration_ms"`
	// Final: the day is over; the row no longer changes.
	Final     bool `json:"final"`
	UpdatedAt Time `json:"updated_at"`
}

func dailyReportFromStore(r *store.DailyReport) DailyReport {
	return DailyReport{
		Day: r.Day, Group: r.Group, JobID: r.JobID, JobName: r.JobName,
		Runs: RunCounts{Total: r.Total, Success: r.Success, Failed: r.Failed, Timeout: r.Timeout, Killed: r.Killed,
			Lost: r.Lost, Skipped: r.Skipped, Unfinished: r.Unfinished},
		LatenessMs: Percentiles{Count: r.LatenessCount, P50: r.LatenessP50, P99: r.LatenessP99},
		DurationMs: Percentiles{Count: r.DurationCount, P50: r.DurationP50, P99: r.DurationP99},
		Final:      r.Final, UpdatedAt: Time{r.UpdatedAt},
	}
}

// dailyReport handles GET /api/v1/reports/daily?from=&to=&group=&page=&page_size=:
// from and to are UTC days (YYYY-MM-DD, inclusive; default the last 7
// days), group an exact appname. A user sees the rows of their groups only.
func (s *server) dailyReport(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	fields := map[string]string{}
	today := s.now().UTC().Truncate(24 * time.Hour)
	to, from := today, today.AddDate(0, 0, -6)
	for name, dst := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := q.Get(name); v != "" {
			d, err := time.Parse(store.DayLayout, v)
			if err != nil {
				fields[name] = name + " must be a day such as 2026-03-01"
				continue
			}
			*dst = d
		}
	}
	if len(fields) == 0 {
		switch {
		case q.Get("to") != "" && q.Get("from") == "":
			from = to.AddDate(0, 0, -6)
		case from.After(to):
			fields["from"] = "from must not be after to"
		case to.Sub(from) >= maxReportDays*24*time.Hour:
			fields["to"] = fmt.Sprintf("a report spans at most %d days", maxReportDays)
		}
	}
	group := strings.TrimSpace(q.Get("group"))
	if len(group) > 191 {
		fields["group"] = "group is at most 191 characters"
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid report filter", Fields: fields}
	}
	f := store.DailyReportFilter{Scope: PrincipalFrom(r.Context()).Scope(), From: from.Format(store.DayLayout),
		To: to.Format(store.DayLayout), Group: group}
	rows, total, err := s.store.FindDailyReports(r.Context(), f, p)
	if err != nil {
		return fmt.Errorf("daily report: %w", err)
	}
	out := List[DailyReport]{Items: make([]DailyReport, 0, len(rows)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range rows {
		out.Items = append(out.Items, dailyReportFromStore(&rows[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
