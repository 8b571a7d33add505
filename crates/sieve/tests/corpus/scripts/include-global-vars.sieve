require ["include", "variables", "fileinto"];
global "folder";
set "folder" "Shared";
include :global "use-folder";
