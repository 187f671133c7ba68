/*
 * protect.h -- paths a backend masks: the policy's denials plus the
 * protected defaults (protect.c has the list and the reasons).
 */
#ifndef SBX_PROTECT_H
#define SBX_PROTECT_H

enum sbx__mask_kind {
	SBX__MASK_READ_ONLY, /* stays read-only, even inside a writable path */
	SBX__MASK_HIDE,      /* unreadable */
};

struct sbx__mask {
	char *path;
	enum sbx__mask_kind kind;
	/* A protected default that matters only once it exists; a denial
	 * must also keep a missing path from being created. */
	bool only_existing;
};

struct sbx__masks {
	struct sbx__mask *v;
	size_t n;
};

/* Builds the masks of |p| (reads $HOME for the defaults); -ENOMEM. */
int sbx__masks_build(const sbx_policy *p, struct sbx__masks *m);
void sbx__masks_free(struct sbx__masks *m);

#endif /* SBX_PROTECT_H */
