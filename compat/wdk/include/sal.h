/*
 * sal.h — the Source Annotation Language and the driver annotations (IRQL, locks, dispatch
 * types) as no-ops. On Windows they feed the static analyser (/analyze, SDV); here they are
 * documentation that must compile. A name that is missing shows up as a compile error in
 * driver code: add it here, empty.
 */
#ifndef SOFTNDK_WDK_SAL_H
#define SOFTNDK_WDK_SAL_H

/* ndkpi.h has its own small SAL block; this header supersedes it. */
#ifndef SOFTNDK_NO_SAL
#define SOFTNDK_NO_SAL
#endif

#define _In_
#define _In_opt_
#define _In_z_
#define _In_opt_z_
#define _In_reads_(n)
#define _In_reads_opt_(n)
#define _In_reads_bytes_(n)
#define _In_reads_bytes_opt_(n)
#define _In_reads_z_(n)
#define _In_range_(lo, hi)
#define _In_count_(n)
#define _In_bytecount_(n)
#define _Out_
#define _Out_opt_
#define _Out_writes_(n)
#define _Out_writes_opt_(n)
#define _Out_writes_bytes_(n)
#define _Out_writes_bytes_opt_(n)
#define _Out_writes_to_(cap, len)
#define _Out_writes_to_opt_(cap, len)
#define _Out_writes_bytes_to_(cap, len)
#define _Out_writes_bytes_to_opt_(cap, len)
#define _Out_writes_all_(n)
#define _Out_writes_bytes_all_(n)
#define _Out_writes_z_(n)
#define _Out_range_(lo, hi)
#define _Inout_
#define _Inout_opt_
#define _Inout_z_
#define _Inout_updates_(n)
#define _Inout_updates_opt_(n)
#define _Inout_updates_bytes_(n)
#define _Inout_updates_bytes_opt_(n)
#define _Outptr_
#define _Outptr_opt_
#define _Outptr_result_maybenull_
#define _Outptr_opt_result_maybenull_
#define _Outptr_result_buffer_(n)
#define _Outptr_result_bytebuffer_(n)
#define _Outptr_result_nullonfailure_
#define _Deref_out_range_(lo, hi)
#define _Deref_out_
#define _Ret_maybenull_
#define _Ret_notnull_
#define _Ret_range_(lo, hi)
#define _Ret_writes_(n)
#define _Ret_writes_bytes_(n)
#define _Ret_writes_bytes_maybenull_(n)
#define _Result_nullonfailure_
#define _Result_zeroonfailure_
#define _Must_inspect_result_
#define _Check_return_
#define _Success_(expr)
#define _Return_type_success_(expr)
#define _Use_decl_annotations_
#define _Printf_format_string_
#define _Null_terminated_
#define _NullNull_terminated_
#define _Notnull_
#define _Maybenull_
#define _Pre_notnull_
#define _Pre_maybenull_
#define _Pre_valid_
#define _Post_invalid_
#define _Post_ptr_invalid_
#define _Post_valid_
#define _Post_z_
#define _Post_writable_byte_size_(n)
#define _Post_equal_to_(x)
#define _Post_satisfies_(x)
#define _Pre_satisfies_(x)
#define _Pre_writable_size_(n)
#define _Frees_ptr_
#define _Frees_ptr_opt_
#define _Reserved_
#define _Const_
#define _Literal_
#define _Points_to_data_
#define _Strict_type_match_
#define _Field_size_(n)
#define _Field_size_opt_(n)
#define _Field_size_bytes_(n)
#define _Field_size_bytes_opt_(n)
#define _Field_size_part_(cap, len)
#define _Field_size_bytes_part_(cap, len)
#define _Field_range_(lo, hi)
#define _Field_z_
#define _Struct_size_bytes_(n)
#define _Guarded_by_(lock)
#define _Interlocked_operand_
#define _Analysis_assume_(expr)
#define _Analysis_assume_lock_held_(lock)
#define _Analysis_assume_lock_not_held_(lock)
#define _Analysis_mode_(mode)
#define _At_(target, annos)
#define _At_buffer_(target, it, n, annos)
#define _When_(cond, annos)
#define _On_failure_(annos)
#define _Always_(annos)
#define _Enum_is_bitflag_
#define _Function_class_(name)
#define _Dispatch_type_(type)
#define _Inexpressible_(x)
#define _Unreferenced_parameter_
#define _Pre_defensive_
#define _Post_defensive_
#define _Kernel_float_saved_
#define _Kernel_float_restored_
#define _Kernel_float_used_
#define _Kernel_clear_do_init_(yesno)
#define _Kernel_requires_resource_held_(kind)
#define _Kernel_requires_resource_not_held_(kind)
#define _Kernel_acquires_resource_(kind)
#define _Kernel_releases_resource_(kind)

/* IRQL annotations. The harness checks IRQL at run time instead (see wdm.h). */
#define _IRQL_requires_(irql)
#define _IRQL_requires_max_(irql)
#define _IRQL_requires_min_(irql)
#define _IRQL_requires_same_
#define _IRQL_raises_(irql)
#define _IRQL_saves_
#define _IRQL_restores_
#define _IRQL_saves_global_(kind, param)
#define _IRQL_restores_global_(kind, param)
#define _IRQL_always_function_max_(irql)
#define _IRQL_always_function_min_(irql)
#define _IRQL_lowers_
#define _IRQL_uses_cancel_
#define _IRQL_is_cancel_

/* Lock annotations. */
#define _Requires_lock_held_(lock)
#define _Requires_lock_not_held_(lock)
#define _Requires_exclusive_lock_held_(lock)
#define _Requires_shared_lock_held_(lock)
#define _Acquires_lock_(lock)
#define _Releases_lock_(lock)
#define _Acquires_exclusive_lock_(lock)
#define _Releases_exclusive_lock_(lock)
#define _Acquires_shared_lock_(lock)
#define _Releases_shared_lock_(lock)
#define _Acquires_nonreentrant_lock_(lock)
#define _Releases_nonreentrant_lock_(lock)
#define _Create_lock_level_(level)
#define _Has_lock_kind_(kind)
#define _Has_lock_level_(level)
#define _Lock_level_order_(a, b)
#define _No_competing_thread_
#define _No_competing_thread_begin_
#define _No_competing_thread_end_
#define _Benign_race_begin_
#define _Benign_race_end_
/* The rest of the concurrency family (concurrencysal.h, "Annotating Locking Behavior"). */
#define _Write_guarded_by_(lock)
#define _Interlocked_
#define _Requires_no_locks_held_
#define _Post_same_lock_(a, b)
#define _Analysis_assume_lock_acquired_(lock)
#define _Analysis_assume_lock_released_(lock)
#define _Analysis_assume_same_lock_(a, b)
#define _Function_ignore_lock_checking_(lock)
#define _Internal_set_lock_count_(lock, count)
#define _Lock_kind_mutex_
#define _Lock_kind_event_
#define _Lock_kind_semaphore_
#define _Lock_kind_spin_lock_
#define _Lock_kind_critical_section_
#define _Global_cancel_spin_lock_
#define _Global_critical_region_
#define _Global_interlock_
#define _Global_priority_region_
#define _Acquires_exclusive_lock_holding_(lock)
#define _Moves_lock_(target, source)
#define _Replaces_lock_(target, source)
#define _Swaps_locks_(a, b)
#define _Detaches_lock_(detached, lock)
/* driverspecs.h words not above */
#define _IRQL_requires_lock_held_(lock)
#define _Kernel_IoGetDmaAdapter_
#define _Drv_aliasesMem_
#define _Drv_allocatesMem_(kind)
#define _Drv_freesMem_(kind)
#define _Pre_unknown_
#define _Post_maybenull_
#define _Post_notnull_
#define _Post_null_
#define _In_reads_or_z_(n)
#define _Out_writes_bytes_all_opt_(n)
#define _Inout_updates_z_(n)
#define _Inout_updates_to_(size, count)
#define _Inout_updates_bytes_to_(size, count)
#define _Outptr_opt_result_buffer_(n)
#define _Outptr_result_bytebuffer_maybenull_(n)
#define _Outptr_result_z_
#define _COM_Outptr_
#define _Deref_pre_z_
#define _Deref_post_z_
#define _Ret_z_
#define _Ret_maybenull_z_
#define _Ret_notnull_z_
#define _Must_inspect_impl_
#define _Field_size_full_(n)
#define _Field_size_bytes_full_(n)
#define _Field_size_bytes_full_opt_(n)
#define _Field_size_part_opt_(size, count)
#define _Satisfies_(expr)
#define _Valid_
#define _Notvalid_
#define _Writable_bytes_(n)
#define _Writable_elements_(n)
#define _Readable_bytes_(n)
#define _Readable_elements_(n)
#define _In_defensive_(annos)
#define _Out_defensive_(annos)
#define _Inout_defensive_(annos)
#define _Scanf_format_string_
#define _Printf_format_string_params_(n)
#define _Param_(n)
#define _Old_(expr)
#define _Curr_
#define _Group_(annos)
#define _Pre_
#define _Post_
#define _Deref_
#define _In_NLS_string_(n)

/* The older __drv_ and __in / __out families still found in driver code. */
#define __drv_aliasesMem
#define __drv_allocatesMem(kind)
#define __drv_freesMem(kind)
#define __drv_maxIRQL(irql)
#define __drv_minIRQL(irql)
#define __drv_requiresIRQL(irql)
#define __drv_setsIRQL(irql)
#define __drv_savesIRQL
#define __drv_restoresIRQL
#define __drv_savesIRQLGlobal(kind, param)
#define __drv_restoresIRQLGlobal(kind, param)
#define __drv_raisesIRQL(irql)
#define __drv_when(cond, annos)
#define __drv_dispatchType(type)
#define __drv_functionClass(name)
#define __drv_sameIRQL
#define __drv_strictType(t, mode)
#define __drv_strictTypeMatch(mode)
#define __drv_mustHold(kind)
#define __drv_neverHold(kind)
#define __drv_acquiresResource(kind)
#define __drv_releasesResource(kind)
#define __drv_inTry
#define __drv_notInTry
#define __drv_reportError(msg)
#define __in
#define __in_opt
#define __out
#define __out_opt
#define __inout
#define __inout_opt
#define __in_bcount(n)
#define __in_bcount_opt(n)
#define __in_ecount(n)
#define __out_bcount(n)
#define __out_bcount_opt(n)
#define __out_ecount(n)
#define __deref_out
#define __deref_out_opt
#define __checkReturn
#define __success(expr)
#define __field_bcount(n)
#define __field_ecount(n)
#define __analysis_assume(expr)

/* Old-style SAL (the sal.h of older WDKs: __nullterminated, __notnull, __in_ecount_opt,
 * __out_bcount_part, __range ...), SAL 2 words not listed above (_Outref_*, _Field_size_*,
 * _Null_terminated_, _Pre_ / _Post_ conditions, _When_, _At_ ...) and further __drv_* words: as
 * every annotation here, no-ops (the analysis they feed is Microsoft's /analyze; gcc and clang
 * check what they can from the code itself). The function-like ones take any arguments. */
#define __nullterminated
#define __notnull
#define __maybenull
#define __readonly
#define __reserved
#define __callback
#define __in_z
#define __out_z
#define __inout_z
#define __in_opt_z
#define __deref_in
#define __deref_inout
#define __deref_opt_out
#define __deref_opt_out_opt
#define __deref_out_z
#define __format_string
#define __override
#define __nullnullterminated
#define __possibly_notnullterminated
#define __post
#define __pre
#define __exceptthat
#define __refparam
#define __valid
#define __notvalid
#define __deref_in_opt
#define __deref_inout_opt
#define __out_z_opt
#define __in_z_opt
#define __inout_z_opt
#define __byte_readableTo
#define __control_entrypoint
#define _Outref_
#define _Outref_result_maybenull_
#define _Outref_result_nullonfailure_
#define _Outptr_opt_result_nullonfailure_
#define _Outptr_result_maybenull_z_
#define _Outptr_opt_result_maybenull_z_
#define _Pre_null_
#define _Pre_invalid_
#define _Ret_null_
#define _Ret_valid_
#define _Inout_opt_z_
#define _Out_z_
#define _Notliteral_
#define _Pre_z_
#define _Deref_out_opt_
#define _Deref_in_
#define _Deref_opt_out_
#define _Deref_opt_out_opt_
#define _Deref_inout_
#define _Analysis_noreturn_
#define __in_ecount_opt(...)
#define __out_ecount_opt(...)
#define __inout_bcount(...)
#define __inout_ecount(...)
#define __inout_bcount_opt(...)
#define __inout_ecount_opt(...)
#define __out_bcount_part(...)
#define __out_ecount_part(...)
#define __out_bcount_part_opt(...)
#define __out_ecount_part_opt(...)
#define __out_bcount_full(...)
#define __out_ecount_full(...)
#define __inout_bcount_full(...)
#define __inout_ecount_full(...)
#define __inout_bcount_part(...)
#define __inout_ecount_part(...)
#define __bcount(...)
#define __ecount(...)
#define __bcount_opt(...)
#define __ecount_opt(...)
#define __in_range(...)
#define __out_range(...)
#define __field_range(...)
#define __range(...)
#define __deref_out_ecount(...)
#define __deref_out_bcount(...)
#define __deref_out_ecount_opt(...)
#define __deref_out_bcount_opt(...)
#define __deref_inout_ecount(...)
#define __typefix(...)
#define __in_xcount(...)
#define __out_xcount(...)
#define __field_ecount_opt(...)
#define __field_bcount_opt(...)
#define __field_ecount_part(...)
#define __field_bcount_part(...)
#define __field_xcount(...)
#define __struct_bcount(...)
#define __struct_xcount(...)
#define __in_ecount_z(...)
#define __out_ecount_z(...)
#define __inout_ecount_z(...)
#define __out_bcount_z(...)
#define __in_bcount_z(...)
#define __drv_innerAcquiresResource(...)
#define __drv_innerReleasesResource(...)
#define __drv_arg(...)
#define __drv_at(...)
#define __drv_isObjectPointer(...)
#define __drv_notPointer(...)
#define __drv_valueIs(...)
#define __drv_completionType(...)
#define __drv_useCancelIRQL(...)
#define _Outref_result_buffer_(...)
#define _Outref_result_bytebuffer_(...)
#define _Outref_result_buffer_maybenull_(...)
#define _Outref_result_bytebuffer_maybenull_(...)
#define _Outref_result_buffer_to_(...)
#define _Outref_result_bytebuffer_to_(...)
#define _Outptr_result_buffer_maybenull_(...)
#define _Outptr_opt_result_bytebuffer_(...)
#define _Outptr_result_buffer_to_(...)
#define _Post_writable_size_(...)
#define _Post_readable_size_(...)
#define _Post_readable_byte_size_(...)
#define _Pre_writable_byte_size_(...)
#define _Pre_readable_size_(...)
#define _Pre_readable_byte_size_(...)
#define _Inout_updates_all_(...)
#define _Inout_updates_bytes_all_(...)
#define _Deref_post_range_(...)
#define _Deref_in_range_(...)
#define _Ret_writes_z_(...)
#define _Ret_writes_maybenull_(...)
#define _Ret_writes_bytes_to_(...)
#define _Ret_writes_to_(...)

#endif /* SOFTNDK_WDK_SAL_H */
