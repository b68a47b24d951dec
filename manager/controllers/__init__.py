"""The hosted controllers: controller objects turned into running views (``hosted``) held in the
set of running controllers (``running``), the view every kind implements (``view``), the hook
Secrets they name (``hookrefs``), finalizer clean-up of deleted controllers (``finalizers``)
and the RBAC rules they need (``rbac``)."""
