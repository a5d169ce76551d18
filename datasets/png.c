/* png.c — PNG decoding with libpng for the importer, and the format dispatcher.
 *
 * png_decode_resized() decodes a PNG held in memory to RGB and resizes it like
 * jpeg_decode_resized() (same contract, same image_resize_u8). Every colour type is accepted:
 * palette images are expanded to RGB, grayscale (any bit depth) to three equal channels, 16-bit
 * samples are scaled to 8 bits (v * 255 / 65535, rounded: libpng's png_set_scale_16), and an
 * alpha channel (RGBA, gray+alpha, or a tRNS chunk) is composited on black: c' = (c * a + 127)
 * / 255 per channel, in the stored values (no gamma handling: gAMA/sRGB/iCCP are ignored).
 * Interlaced (Adam7) images are de-interlaced. Width and height are capped at 65535 each and
 * 100 M pixels in total, checked after the header and before any pixel buffer is allocated.
 *
 * Errors are caught with libpng's setjmp/longjmp: every libpng error (bad signature, a CRC error
 * in a critical chunk, a bad IHDR, corrupt zlib data, missing image data) and a file that ends
 * early (the memory reader raises it) become a one-line reason in err (with libpng's last
 * warning in parentheses, which often says why, e.g. "Image width exceeds user limit in IHDR").
 * Ancillary chunks with a bad CRC are discarded (libpng's default). Nothing is printed.
 * Thread-safe: all state lives on the caller's stack.
 *
 * image_decode_resized() picks the decoder from the first bytes (PNG signature, JPEG SOI
 * marker), never from the file name.
 */
#define _POSIX_C_SOURCE 200809L

#include "dataset.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#define PNG_MAX_SIDE 65535u
#define PNG_MAX_PIXELS (100L * 1000 * 1000)

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char msg[160];
    char warn[96]; /* the last warning: libpng often warns with the reason, then errors */
} PngState;

static void set_err(char *err, size_t cap, const char *what) {
    if (err && cap) snprintf(err, cap, "%s", what);
}

/* libpng error callback: keeps the first reason, then unwinds to the setjmp in
 * png_decode_resized (png_longjmp never returns). */
static void on_png_error(png_structp png, png_const_charp msg) {
    PngState *s = png_get_error_ptr(png);
    if (s && !s->msg[0]) {
        if (s->warn[0]) snprintf(s->msg, sizeof s->msg, "bad PNG: %s (%s)", msg ? msg : "decoding failed", s->warn);
        else snprintf(s->msg, sizeof s->msg, "bad PNG: %s", msg ? msg : "decoding failed");
    }
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
    PngState *s = png_get_error_ptr(png);
    if (s && msg) {
        snprintf(s->warn, sizeof s->warn, "%s", msg);
        for (char *c = s->warn; *c; c++)
            if ((unsigned char)*c < 0x20) *c = ' ';
    }
}

static void on_png_read(png_structp png, png_bytep data, size_t n) {
    PngState *s = png_get_io_ptr(png);
    if (n > s->len - s->pos) {
        snprintf(s->msg, sizeof s->msg, "truncated PNG data (premature end of file)");
        png_error(png, "truncated");
    }
    memcpy(data, s->buf + s->pos, n);
    s->pos += n;
}

int png_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap) {
    if (!buf || len == 0) {
        set_err(err, errcap, "empty file");
        return 1;
    }
    if (len < 8 || memcmp(buf, png_signature, 8) != 0) {
        set_err(err, errcap,
                len < 8 && memcmp(buf, png_signature, len) == 0 ? "truncated PNG data (premature end of file)"
                                                                : "not a PNG file (bad signature)");
        return 1;
    }
    if (size < 1 || size > 4096) {
        set_err(err, errcap, "bad output size");
        return 1;
    }
    PngState s;
    memset(&s, 0, sizeof s);
    s.buf = buf;
    s.len = len;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        set_err(err, errcap, "out of memory for the PNG decoder");
        return 1;
    }
    /* modified between setjmp and a possible longjmp: volatile, freed on the error path */
    uint8_t *volatile img = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        free(img);
        set_err(err, errcap, s.msg[0] ? s.msg : "bad PNG: decoding failed");
        return 1;
    }
    png_set_read_fn(png, &s, on_png_read);
    png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE);
    png_set_chunk_malloc_max(png, 8u << 20);
    png_read_info(png, info);
    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0, interlace = 0;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if (w < 1 || h < 1 || w > PNG_MAX_SIDE || h > PNG_MAX_SIDE || (long)w * (long)h > PNG_MAX_PIXELS) {
        snprintf(s.msg, sizeof s.msg, "image too large: %ux%u pixels", (unsigned)w, (unsigned)h);
        png_longjmp(png, 1);
    }
    int alpha = (ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
    png_set_expand(png); /* palette -> RGB, gray 1/2/4 -> 8 bits, tRNS -> alpha */
    png_set_scale_16(png);
    png_set_gray_to_rgb(png);
    if (!alpha) png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 4 || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)w * 4) {
        snprintf(s.msg, sizeof s.msg, "unsupported PNG: %ux%u, colour type %d, %d bits", (unsigned)w, (unsigned)h,
                 ctype, depth);
        png_longjmp(png, 1);
    }
    img = malloc((size_t)w * h * 4);
    rows = malloc((size_t)h * sizeof(png_bytep));
    if (!img || !rows) {
        snprintf(s.msg, sizeof s.msg, "out of memory for a %ux%u image", (unsigned)w, (unsigned)h);
        png_longjmp(png, 1);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = img + (size_t)y * w * 4;
    png_read_image(png, rows);
    png_read_end(png, NULL); /* checks the CRCs of the chunks after the image data, up to IEND */
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    uint8_t *im = img;
    for (size_t i = 0, n = (size_t)w * h; i < n; i++) {
        unsigned a = im[4 * i + 3];
        for (int c = 0; c < 3; c++) im[3 * i + c] = (uint8_t)((im[4 * i + c] * a + 127) / 255);
    }
    image_resize_u8(im, (int)h, (int)w, 3, out, size, size);
    free(im);
    return 0;
}

int image_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap) {
    if (buf && len >= 4 && memcmp(buf, png_signature, 4) == 0)
        return png_decode_resized(buf, len, size, out, err, errcap);
    if (buf && len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8)
        return jpeg_decode_resized(buf, len, size, out, err, errcap);
    if (!buf || len == 0) {
        set_err(err, errcap, "empty file");
    } else if (err && errcap) {
        snprintf(err, errcap, "neither a JPEG nor a PNG file (starts with 0x%02x 0x%02x)", buf[0],
                 len > 1 ? buf[1] : 0);
    }
    return 1;
}
