/*
 * bench/tiny.c -- the smallest program that can be run: static, no libc,
 * a handful of instructions.  Spawning it measures the cost of starting a
 * process and nothing of the program itself.
 *
 *   tiny               exits 0 at once
 *   tiny sleep         writes one byte ("up") to stdout, then sleeps until killed
 *   tiny write BYTES   writes BYTES zero bytes to stdout in 1 MiB writes, exits 0
 *
 * Built with -static -nostdlib -ffreestanding; x86-64 and aarch64 only (the
 * bench skips it elsewhere).
 */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "bench/tiny supports x86-64 and aarch64 only"
#endif

#define CHUNK (1L << 20)

static char zeros[CHUNK];

#if defined(__x86_64__)
#define SYS_WRITE 1
#define SYS_PAUSE 34
#define SYS_EXIT_GROUP 231
static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
/* The kernel starts a program with argc at the stack pointer, argv above it. */
__asm__(".text\n.globl _start\n_start:\n\txor %ebp, %ebp\n\tmov %rsp, %rdi\n"
        "\tand $-16, %rsp\n\tcall tiny_main\n\thlt\n");
#else
#define SYS_WRITE 64
#define SYS_PPOLL 73
#define SYS_EXIT_GROUP 94
static long sys3(long n, long a, long b, long c)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
}
__asm__(".text\n.globl _start\n_start:\n\tmov x0, sp\n\tbl tiny_main\n");
#endif

static void sleep_forever(void)
{
	for (;;) {
#if defined(__x86_64__)
		sys3(SYS_PAUSE, 0, 0, 0);
#else
		sys3(SYS_PPOLL, 0, 0, 0);
#endif
	}
}

static int same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

void tiny_main(long *sp) __attribute__((noreturn, used));
void tiny_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	long status = 0;
	if (argc > 1 && same(argv[1], "sleep")) {
		sys3(SYS_WRITE, 1, (long)"up", 2);
		sleep_forever();
	} else if (argc > 2 && same(argv[1], "write")) {
		long left = 0;
		for (const char *p = argv[2]; *p >= '0' && *p <= '9'; p++)
			left = left * 10 + (*p - '0');
		while (left > 0) {
			long n = sys3(SYS_WRITE, 1, (long)zeros, left < CHUNK ? left : CHUNK);
			if (n <= 0) {
				status = 1;
				break;
			}
			left -= n;
		}
	} else if (argc > 1) {
		status = 2;
	}
	sys3(SYS_EXIT_GROUP, status, 0, 0);
	for (;;)
		;
}
