/* jpeg.c — JPEG decoding with libjpeg(-turbo) and 8-bit image resizing for the importer.
 *
 * jpeg_decode_resized() decodes a JPEG held in memory to RGB: YCbCr and RGB directly, grayscale
 * expanded to three equal channels, CMYK/YCCK converted (Adobe's inverted CMYK when the Adobe
 * marker says so). Large images are first shrunk by libjpeg's DCT scaling (the smallest n/8
 * that keeps both sides >= the target), then resized to size x size by image_resize_u8 (area
 * average when shrinking, bilinear with half-pixel centres when enlarging, a plain copy when
 * the size already matches). The whole image is resized, aspect ratio not kept (as in the
 * downsampled-ImageNet sets). Errors are caught with setjmp/longjmp; a premature end of data,
 * which libjpeg only warns about, counts as an error. Nothing is printed. Thread-safe: all
 * state lives on the caller's stack.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#define JPEG_MAX_PIXELS (100L * 1000 * 1000)

/* ---- resizing */

typedef struct {
    int *start, *count;
    float *w;
    int maxt;
} Taps;

static int taps_init(Taps *t, int in, int out) {
    t->maxt = out < in ? (int)ceil((double)in / out) + 2 : 2;
    t->start = malloc((size_t)out * sizeof(int));
    t->count = malloc((size_t)out * sizeof(int));
    t->w = malloc((size_t)out * t->maxt * sizeof(float));
    if (!t->start || !t->count || !t->w) return 0;
    for (int i = 0; i < out; i++) {
        float *w = t->w + (size_t)i * t->maxt;
        if (in == out) {
            t->start[i] = i;
            t->count[i] = 1;
            w[0] = 1.0f;
        } else if (out < in) {
            double scale = (double)in / out, lo = i * scale, hi = (i + 1) * scale;
            int j0 = (int)floor(lo), j1 = (int)ceil(hi);
            if (j1 > in) j1 = in;
            if (j1 - j0 > t->maxt) j1 = j0 + t->maxt;
            t->start[i] = j0;
            t->count[i] = j1 - j0;
            for (int j = j0; j < j1; j++) {
                double a = lo > j ? lo : j, b = hi < j + 1 ? hi : j + 1;
                w[j - j0] = (float)((b > a ? b - a : 0.0) / scale);
            }
        } else {
            double c = (i + 0.5) * in / out - 0.5;
            if (c < 0) c = 0;
            int j0 = (int)floor(c);
            double f = c - j0;
            if (j0 >= in - 1) {
                j0 = in - 1;
                f = 0;
            }
            t->start[i] = j0;
            t->count[i] = f > 0 ? 2 : 1;
            w[0] = (float)(1 - f);
            w[1] = (float)f;
        }
    }
    return 1;
}

static void taps_free(Taps *t) {
    free(t->start);
    free(t->count);
    free(t->w);
}

void image_resize_u8(const uint8_t *src, int sh, int sw, int c, uint8_t *dst, int dh, int dw) {
    if (sh == dh && sw == dw) {
        memcpy(dst, src, (size_t)sh * sw * c);
        return;
    }
    Taps tx = {0}, ty = {0};
    float *tmp = malloc((size_t)sh * dw * c * sizeof(float));
    if (!tmp || !taps_init(&tx, sw, dw) || !taps_init(&ty, sh, dh)) {
        /* out of memory: nearest neighbour needs nothing */
        for (int y = 0; y < dh; y++)
            for (int x = 0; x < dw; x++)
                memcpy(dst + ((size_t)y * dw + x) * c, src + ((size_t)(y * sh / dh) * sw + (size_t)x * sw / dw) * c,
                       (size_t)c);
        free(tmp);
        taps_free(&tx);
        taps_free(&ty);
        return;
    }
    for (int y = 0; y < sh; y++) {
        const uint8_t *row = src + (size_t)y * sw * c;
        float *o = tmp + (size_t)y * dw * c;
        for (int x = 0; x < dw; x++) {
            const float *w = tx.w + (size_t)x * tx.maxt;
            for (int ch = 0; ch < c; ch++) {
                float acc = 0;
                for (int k = 0; k < tx.count[x]; k++) acc += w[k] * row[(size_t)(tx.start[x] + k) * c + ch];
                o[(size_t)x * c + ch] = acc;
            }
        }
    }
    for (int y = 0; y < dh; y++) {
        const float *w = ty.w + (size_t)y * ty.maxt;
        uint8_t *o = dst + (size_t)y * dw * c;
        for (int i = 0; i < dw * c; i++) {
            float acc = 0;
            for (int k = 0; k < ty.count[y]; k++) acc += w[k] * tmp[(size_t)(ty.start[y] + k) * dw * c + i];
            int v = (int)lrintf(acc);
            o[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    free(tmp);
    taps_free(&tx);
    taps_free(&ty);
}

/* ---- decoding */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int eof;
} JpegErr;

static void on_error_exit(j_common_ptr ci) {
    JpegErr *e = (JpegErr *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

static void on_emit(j_common_ptr ci, int level) {
    JpegErr *e = (JpegErr *)ci->err;
    if (level < 0) {
        if (ci->err->msg_code == JWRN_JPEG_EOF && !e->eof) {
            e->eof = 1;
            (*ci->err->format_message)(ci, e->msg);
        }
        ci->err->num_warnings++;
    }
}

static void on_output(j_common_ptr ci) { (void)ci; }

static void set_err(char *err, size_t cap, const char *what) {
    if (err && cap) snprintf(err, cap, "%s", what);
}

int jpeg_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap) {
    if (!buf || len < 4 || buf[0] != 0xFF || buf[1] != 0xD8) {
        char m[128];
        if (len >= 8 && buf[0] == 0x89 && buf[1] == 'P' && buf[2] == 'N' && buf[3] == 'G')
            snprintf(m, sizeof m, "a PNG file, not a JPEG (image_decode_resized decodes both)");
        else if (len == 0) snprintf(m, sizeof m, "empty file");
        else
            snprintf(m, sizeof m, "not a JPEG file (starts with 0x%02x 0x%02x, expected 0xff 0xd8)", buf[0],
                     len > 1 ? buf[1] : 0);
        set_err(err, errcap, m);
        return 1;
    }
    if (size < 1 || size > 4096) {
        set_err(err, errcap, "bad output size");
        return 1;
    }
    struct jpeg_decompress_struct ci;
    JpegErr je;
    memset(&je, 0, sizeof je);
    uint8_t *volatile img = NULL;
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = on_error_exit;
    je.pub.emit_message = on_emit;
    je.pub.output_message = on_output;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        free(img);
        set_err(err, errcap, je.msg[0] ? je.msg : "JPEG decoding failed");
        return 1;
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, (unsigned char *)buf, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    if ((long)ci.image_width * (long)ci.image_height > JPEG_MAX_PIXELS) {
        snprintf(je.msg, sizeof je.msg, "image too large: %ux%u pixels", ci.image_width, ci.image_height);
        jpeg_destroy_decompress(&ci);
        set_err(err, errcap, je.msg);
        return 1;
    }
    int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    int n = 8;
    for (int k = 1; k <= 8; k++) {
        long w = ((long)ci.image_width * k + 7) / 8, h = ((long)ci.image_height * k + 7) / 8;
        if (w >= size && h >= size) {
            n = k;
            break;
        }
    }
    ci.scale_num = (unsigned)n;
    ci.scale_denom = 8;
    jpeg_start_decompress(&ci);
    int ow = (int)ci.output_width, oh = (int)ci.output_height, oc = ci.output_components;
    if (ow < 1 || oh < 1 || (oc != 3 && oc != 4)) {
        snprintf(je.msg, sizeof je.msg, "unsupported JPEG: %dx%d with %d components", ow, oh, oc);
        longjmp(je.jb, 1);
    }
    img = malloc((size_t)ow * oh * oc);
    if (!img) {
        snprintf(je.msg, sizeof je.msg, "out of memory for a %dx%d image", ow, oh);
        longjmp(je.jb, 1);
    }
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = img + (size_t)ci.output_scanline * ow * oc;
        if (jpeg_read_scanlines(&ci, &row, 1) != 1 || je.eof) break;
    }
    if (je.eof) {
        snprintf(je.msg, sizeof je.msg, "truncated JPEG data (premature end of file)");
        longjmp(je.jb, 1);
    }
    int inverted = ci.saw_Adobe_marker;
    jpeg_finish_decompress(&ci);
    if (je.eof) {
        snprintf(je.msg, sizeof je.msg, "truncated JPEG data (premature end of file)");
        longjmp(je.jb, 1);
    }
    jpeg_destroy_decompress(&ci);
    uint8_t *im = img;
    if (oc == 4) {
        for (size_t i = 0; i < (size_t)ow * oh; i++) {
            unsigned c = im[4 * i], m = im[4 * i + 1], y = im[4 * i + 2], k = im[4 * i + 3];
            if (!inverted) {
                c = 255 - c;
                m = 255 - m;
                y = 255 - y;
                k = 255 - k;
            }
            im[3 * i] = (uint8_t)((c * k + 127) / 255);
            im[3 * i + 1] = (uint8_t)((m * k + 127) / 255);
            im[3 * i + 2] = (uint8_t)((y * k + 127) / 255);
        }
    }
    image_resize_u8(im, oh, ow, 3, out, size, size);
    free(im);
    return 0;
}
