/* Writes the 4-channel JPEG fixtures of tests/fixtures/jpeg/ (committed; CI does not run
 * this): a 24x16 picture of varied inks, as CMYK or YCCK, with or without Adobe's APP14
 * marker, its samples stored inverted (Photoshop's convention) when the marker is written.
 *
 *   cc -O2 tests/helpers/make_cmyk_jpeg.c -ljpeg -o /tmp/make_cmyk_jpeg
 *   /tmp/make_cmyk_jpeg cmyk|ycck adobe|plain OUT.jpg
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const int ycck = strcmp(argv[1], "ycck") == 0, adobe = strcmp(argv[2], "adobe") == 0;
  const int W = 24, H = 16;
  FILE* f = fopen(argv[3], "wb");
  if (!f) return 1;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = W, c.image_height = H, c.input_components = 4, c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_colorspace(&c, ycck ? JCS_YCCK : JCS_CMYK);
  jpeg_set_quality(&c, 95, TRUE);
  c.write_Adobe_marker = adobe;  /* YCCK needs it to be recognised; "plain" is CMYK only */
  jpeg_start_compress(&c, TRUE);
  unsigned char row[24 * 4];
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      /* Smooth ramps plus a few solid patches: every ink from none to full. */
      unsigned char ink[4] = {(unsigned char)(x * 255 / (W - 1)), (unsigned char)(y * 255 / (H - 1)),
                              (unsigned char)((x + y) * 255 / (W + H - 2)), (unsigned char)(x < 8 ? 0 : x < 16 ? 96 : 200)};
      for (int k = 0; k < 4; ++k) row[x * 4 + k] = adobe ? 255 - ink[k] : ink[k];
    }
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(f);
  return 0;
}
