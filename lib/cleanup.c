/* cleanup.c -- removing the directories a session made. */
#include "internal.h"
