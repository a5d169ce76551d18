/* test_where.c — "where and when, at a glance" (issue 26 item 4): the pure helpers of core/records.h
 * that the loss curves, `moelab plot`, the browser's list and the sweep summary share: the alarm
 * level of a step row (the alarm column, else an old session's collapsed flag), spans of logged
 * steps by level (opened, extended, closed, split on a change of level, rows of a resume ignored,
 * neighbours merged when the store is full), the highest level over a step range, and the alarm
 * events of an event log counted by kind with their "2C 1W 1D" text. */
#include <stdio.h>
#include <string.h>

#include "core/records.h"
#include "core/routestats.h"

#include "check.h"

static void test_level(void) {
    StepRecord r;
    memset(&r, 0, sizeof r);
    check(step_record_alarm_level(&r) == ALARM_NONE, "nothing: none");
    r.alarm = ALARM_WARNING;
    check(step_record_alarm_level(&r) == ALARM_WARNING, "alarm 1: warning");
    r.alarm = ALARM_COLLAPSE;
    r.collapsed = 1;
    check(step_record_alarm_level(&r) == ALARM_COLLAPSE, "alarm 2: collapse");
    r.alarm = 0; /* an old session: no alarm column */
    check(step_record_alarm_level(&r) == ALARM_COLLAPSE, "old session: collapsed rows are red");
    r.alarm = 7;
    check(step_record_alarm_level(&r) == ALARM_COLLAPSE, "out of range: clamped to collapse");
}

static void test_spans(void) {
    /* logged every 5 steps: warning 20..35, collapse 40..50 (right after it), none, warning 80 alone */
    StepRecord rows[30];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 30; i++) {
        rows[i].step = 5L * (i + 1);
        const long s = rows[i].step;
        rows[i].alarm = s >= 20 && s <= 35 ? 1 : s >= 40 && s <= 50 ? 2 : s == 80 ? 1 : 0;
        rows[i].collapsed = rows[i].alarm == 2;
    }
    AlarmSpans a;
    const int n = alarm_spans(rows, 30, &a);
    check(n == 3, "three spans (%d)", n);
    check(a.span[0].start == 20 && a.span[0].end == 35 && a.span[0].level == 1, "warning 20..35 (%ld..%ld, %d)",
          a.span[0].start, a.span[0].end, a.span[0].level);
    check(a.span[1].start == 40 && a.span[1].end == 50 && a.span[1].level == 2, "collapse 40..50 (%ld..%ld, %d)",
          a.span[1].start, a.span[1].end, a.span[1].level);
    check(a.span[2].start == 80 && a.span[2].end == 80 && a.span[2].level == 1, "a one-row warning at 80");
    check(!a.open && a.merged == 0 && a.last == 150, "closed at the end, nothing merged, last step 150");
    check(alarm_spans_level(&a, 0, 19) == 0 && alarm_spans_level(&a, 30, 30) == 1 &&
              alarm_spans_level(&a, 30, 45) == 2 && alarm_spans_level(&a, 51, 79) == 0 &&
              alarm_spans_level(&a, 79.5, 80.5) == 1,
          "levels over step ranges");
    /* a resumed run's rows again (steps not after the last): ignored */
    alarm_spans_push(&a, 100, 2);
    check(a.n == 3, "a step before the last is ignored");
    alarm_spans_push(&a, 155, 2);
    alarm_spans_push(&a, 160, 2);
    check(a.n == 4 && a.open && a.span[3].start == 155 && a.span[3].end == 160, "then it goes on");
    /* an old session: alarm 0 everywhere, collapsed rows */
    for (int i = 0; i < 30; i++) rows[i].alarm = 0;
    check(alarm_spans(rows, 30, &a) == 1 && a.span[0].start == 40 && a.span[0].end == 50 && a.span[0].level == 2,
          "old session: its collapsed rows, one red span");
    /* more spans than the store: neighbours with the smallest gap merge, the shape stays */
    alarm_spans_init(&a);
    long step = 0;
    for (int k = 0; k < ALARM_SPANS_MAX + 10; k++) {
        const long gap = k == 7 ? 1 : 10; /* spans 6 and 7 are the closest */
        step += gap;
        alarm_spans_push(&a, step, k % 2 ? 1 : 2);
        step += 1;
        alarm_spans_push(&a, step, 0);
    }
    check(a.n == ALARM_SPANS_MAX && a.merged == 10, "a full store: %d spans, %ld merged", a.n, a.merged);
    int sorted = 1;
    for (int i = 0; i + 1 < a.n; i++) sorted &= a.span[i].end < a.span[i + 1].start;
    check(sorted && a.span[0].start == 10 && a.span[a.n - 1].start == step - 1, "in order, from the first to the last");
    long covered = 0;
    for (int i = 0; i < a.n; i++) covered += a.span[i].start <= 7 * 11 + 1 && a.span[i].end >= 7 * 11 + 1;
    check(covered == 1, "the closest pair merged first (one span over both)");
}

static void test_counts(void) {
    static const char *const log[] = {
        "set tau 0.5  # screen",
        "warning at step 120 (clean router view, episode 1, first): WARNING clean router: 71% of first choices to e2",
        "collapse at step 300 (training view, episode 1, first): COLLAPSE training: 83% of first choices to e3",
        "collapse at step 300 (evaluation view, episode 1, first): COLLAPSE evaluation: ...",
        "expert death at step 310 (e1, death 1): EXPERT DEATH moe2: e1 ...",
        "expert revival at step 400 (e1): EXPERT REVIVAL e1 ...",
        "rule: pause (on-collapse at step 300: COLLAPSE training ...)",
        "collapse at stepping",
        "checkpoint ckpt-300.h5 (collapse at step 300)",
        "warning at step 500 (idle router, episode 1, first): WARNING router idle: the noise is routing",
    };
    AlarmCounts c;
    memset(&c, 0, sizeof c);
    int kinds[10];
    for (int i = 0; i < 10; i++) kinds[i] = alarm_count_event(&c, log[i]);
    check(c.collapse == 2 && c.warning == 2 && c.death == 1 && c.revival == 1, "counts %d C %d W %d D %d R",
          c.collapse, c.warning, c.death, c.revival);
    check(kinds[0] == -1 && kinds[1] == 1 && kinds[2] == 2 && kinds[4] == 1 && kinds[5] == 0 && kinds[6] == -1 &&
              kinds[7] == -1 && kinds[8] == -1 && kinds[9] == 1,
          "kinds: only texts that start with the event words");
    char buf[32];
    alarm_counts_text(&c, buf, sizeof buf);
    check(!strcmp(buf, "2C 2W 1D"), "text '%s' (the clean router's and the idle router's warnings)", buf);
    AlarmCounts z;
    memset(&z, 0, sizeof z);
    alarm_counts_text(&z, buf, sizeof buf);
    check(!strcmp(buf, "-"), "none: '%s'", buf);
    z.revival = 3;
    alarm_counts_text(&z, buf, sizeof buf);
    check(!strcmp(buf, "-"), "revivals alone: '%s'", buf);
    z.death = 12;
    alarm_counts_text(&z, buf, sizeof buf);
    check(!strcmp(buf, "12D"), "deaths alone: '%s'", buf);
    c.collapse = 123;
    alarm_counts_text(&c, buf, 6);
    check(strlen(buf) == 5 && !strncmp(buf, "123C ", 5), "a short buffer is cut, not overrun: '%s'", buf);
}

int main(void) {
    test_level();
    test_spans();
    test_counts();
    printf("test_where: %d checks, %d failures\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
