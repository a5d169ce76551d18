/* view.c — the view vtable dispatch (see view.h). */
#include "view.h"

#include <string.h>

int view_init(View *v, const ViewClass *cls, const ViewCtx *ctx) {
    memset(v, 0, sizeof *v);
    v->cls = cls;
    v->ctx = ctx;
    return cls->init ? cls->init(v) : 0;
}

void view_free(View *v) {
    if (v->cls && v->cls->free) v->cls->free(v);
    memset(v, 0, sizeof *v);
}

void view_update(View *v, const ViewMsg *m) {
    if (v->cls && v->cls->update) v->cls->update(v, m);
}

void view_draw(View *v, WINDOW *w, Rect r) {
    if (v->cls && v->cls->draw && r.w > 0 && r.h > 0) v->cls->draw(v, w, r);
}

int view_on_key(View *v, int key) {
    return v->cls && v->cls->on_key ? v->cls->on_key(v, key) : 0;
}

void view_title(const View *v, char *buf, size_t n) {
    if (!n) return;
    if (v->cls && v->cls->title) v->cls->title(v, buf, n);
    else snprintf(buf, n, "%s", v->cls ? v->cls->name : "");
}
