# serve.mk -- `sbx serve`: the wire protocol (included by Makefile.am).
sbx_serve_sources = src/serve.c
