/* session.c -- a sandbox with a workspace and scratch space around it. */
#include "internal.h"
