/* cupyops.simt: x86-64 SysV fiber context switch (no syscalls).
 *
 * void __simt_swap(void **save_sp, void *new_sp)
 *   Pushes the callee-saved registers, MXCSR and the x87 control word on the
 *   current stack, stores the stack pointer in *save_sp, loads new_sp and pops
 *   the same frame from there.
 *
 * __simt_fiber_trampoline: first activation of a fresh fiber; the initial
 *   frame (built by the runtime) holds the entry function in r12 and its
 *   argument in r13.  The entry function never returns.
 */
    .text
    .globl  __simt_swap
    .hidden __simt_swap
    .type   __simt_swap, @function
__simt_swap:
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    subq    $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw  (%rsp)
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    ldmxcsr 8(%rsp)
    fldcw   (%rsp)
    addq    $16, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    ret
    .size   __simt_swap, .-__simt_swap

    .globl  __simt_fiber_trampoline
    .hidden __simt_fiber_trampoline
    .type   __simt_fiber_trampoline, @function
__simt_fiber_trampoline:
    movq    %r13, %rdi
    xorl    %ebp, %ebp
    callq   *%r12
    ud2
    .size   __simt_fiber_trampoline, .-__simt_fiber_trampoline

    .section .note.GNU-stack,"",@progbits
